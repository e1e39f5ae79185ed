/**
 * Renders a simulation as one SVG document (a string): one panel per algorithm, side by side on
 * the same time axis and the same vertical scale, with admitted requests (one colour per
 * instance) stacked under denied ones (hatched). Pure string building, no DOM: the page inserts
 * the string, and the figure script writes it to a file, byte for byte the same.
 */
import { type AlgorithmRun, formatMs, type SimulationResult } from "./simulate.ts";

export interface ChartOptions {
  /** Total width in px (the SVG scales to its container; this sets the proportions). Default 960. */
  width?: number;
  /** Panels per row. Default 2. */
  columns?: number;
  /** Height of each panel in px. Default 250. */
  panelHeight?: number;
  /** A heading drawn above the legend. */
  title?: string;
  /** Prefixes the SVG's ids, so several charts can share one page. Default "fg". */
  idPrefix?: string;
}

/** Okabe–Ito colours, distinguishable with the common colour-vision deficiencies. */
export const INSTANCE_COLOURS = ["#0072B2", "#009E73", "#56B4E9", "#CC79A7"] as const;
export const DENIED_COLOUR = "#D55E00";
const DENIED_FILL = "#FBE1D3";
const INK = "#1F2328";
const MUTED = "#59636E";
const GRID = "#E4E7EB";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";

const MARGIN = { left: 52, right: 14, top: 62, bottom: 42 };
const GAP = 20;
const TARGET_BINS = 30;

/** A number for an attribute: at most two decimals, no trailing zeros, never "-0". */
const n = (x: number): string => {
  const r = Math.round(x * 100) / 100;
  return String(r === 0 ? 0 : r);
};

const escapeXml = (text: string): string => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** The smallest of 1, 2, 5 × 10^k that is at least `x`. */
export function niceStep(x: number): number {
  const power = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * power >= x - power * 1e-9) return m * power;
  return 10 * power;
}

/** Seconds for a tick label: as many decimals as the step needs. */
function secondsLabel(ms: number, stepMs: number): string {
  const decimals = stepMs >= 1000 ? 0 : stepMs >= 100 ? 1 : stepMs >= 10 ? 2 : 3;
  const text = (ms / 1000).toFixed(decimals);
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text.replace("-", "\u2212");
}

interface Binned {
  /** Per bin: admitted per instance, then denied. */
  admitted: number[][];
  denied: number[];
  max: number;
}

function bin(run: AlgorithmRun, startMs: number, binMs: number, bins: number, instances: number): Binned {
  const admitted = Array.from({ length: bins }, () => new Array<number>(instances).fill(0));
  const denied = new Array<number>(bins).fill(0);
  for (const r of run.requests) {
    const i = Math.min(bins - 1, Math.max(0, Math.floor((r.t - startMs) / binMs)));
    if (r.allowed) admitted[i]![r.instance]!++;
    else denied[i]!++;
  }
  let max = 0;
  for (let i = 0; i < bins; i++) max = Math.max(max, admitted[i]!.reduce((a, b) => a + b, 0) + denied[i]!);
  return { admitted, denied, max };
}

/** The time bins every panel shares: a round width, about TARGET_BINS of them, covering every request. */
export function binsOf(result: SimulationResult): { startMs: number; binMs: number; bins: number } {
  const binMs = niceStep((result.toMs - result.fromMs) / TARGET_BINS);
  const startMs = Math.floor(result.fromMs / binMs) * binMs;
  let last = result.fromMs;
  for (const run of result.runs) for (const r of run.requests) last = Math.max(last, r.t);
  const bins = Math.max(Math.ceil((result.toMs - startMs) / binMs), Math.floor((last - startMs) / binMs) + 1, 1);
  return { startMs, binMs, bins };
}

const LEGEND_LINE = 22;

/** The legend, wrapped to `width`; returns its markup and height. */
function legend(result: SimulationResult, x: number, y: number, width: number, id: string): { svg: string; height: number } {
  const instances = result.scenario.instances;
  const items: { swatch: string; label: string }[] = [];
  for (let i = 0; i < instances; i++) {
    items.push({
      swatch: `<rect width="14" height="14" rx="2" fill="${INSTANCE_COLOURS[i]}"/>`,
      label: instances === 1 ? "admitted" : `admitted by instance ${i + 1}`,
    });
  }
  items.push({
    swatch: `<rect width="14" height="14" rx="2" fill="url(#${id}-denied)" stroke="${DENIED_COLOUR}"/>`,
    label: "denied (429)",
  });
  if (result.runs.some((r) => r.kind !== "token-bucket")) {
    items.push({
      swatch: `<line x1="7" y1="-1" x2="7" y2="15" stroke="${INK}" stroke-width="1.5" stroke-dasharray="4 3"/>`,
      label: "window boundary",
    });
  }
  let out = `<g class="legend" font-size="13" fill="${INK}">`;
  let cx = x;
  let cy = y;
  for (const item of items) {
    // An estimate of the label's width at 13 px (no text metrics outside a browser).
    const itemWidth = 20 + item.label.length * 7 + 22;
    if (cx > x && cx + itemWidth > x + width) {
      cx = x;
      cy += LEGEND_LINE;
    }
    out += `<g transform="translate(${n(cx)},${n(cy)})">${item.swatch}<text x="20" y="11.5">${escapeXml(item.label)}</text></g>`;
    cx += itemWidth;
  }
  return { svg: `${out}</g>`, height: cy - y + LEGEND_LINE + 8 };
}

function panel(
  run: AlgorithmRun,
  result: SimulationResult,
  binned: Binned,
  layout: {
    x: number;
    y: number;
    width: number;
    height: number;
    yMax: number;
    yStep: number;
    startMs: number;
    binMs: number;
    bins: number;
  },
  id: string,
): string {
  const { x, y, width, height, yMax, yStep, startMs, binMs, bins } = layout;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const left = x + MARGIN.left;
  const top = y + MARGIN.top;
  const bottom = top + plotH;
  const endMs = startMs + bins * binMs;
  const xOf = (ms: number): number => left + ((ms - startMs) / (endMs - startMs)) * plotW;
  const yOf = (count: number): number => bottom - (count / yMax) * plotH;
  const instances = result.scenario.instances;

  let out = `<g class="panel" data-algorithm="${run.kind}">`;
  // Heading: the algorithm and its parameters, then what it admitted.
  out += `<text x="${n(x + MARGIN.left)}" y="${n(y + 18)}" font-size="15" font-weight="600" fill="${INK}">${
    escapeXml(run.label)
  } <tspan font-weight="400" fill="${MUTED}">(${escapeXml(run.description)})</tspan></text>`;
  let counts = `admitted ${run.admitted} · denied ${run.denied}`;
  if (instances > 1) counts += ` · per instance ${run.perInstance.map((c) => c.admitted).join(" / ")}`;
  out += `<text x="${n(x + MARGIN.left)}" y="${n(y + 38)}" font-size="13" fill="${INK}">${escapeXml(counts)}</text>`;

  // Horizontal grid and the y axis.
  out += `<g font-size="11" fill="${MUTED}" text-anchor="end">`;
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    const ty = yOf(v);
    out += `<line x1="${n(left)}" y1="${n(ty)}" x2="${n(left + plotW)}" y2="${n(ty)}" stroke="${GRID}"/>`;
    out += `<text x="${n(left - 6)}" y="${n(ty + 4)}">${v}</text>`;
  }
  out += `</g>`;

  // Bars: admitted per instance from the bottom, denied on top.
  const barW = plotW / bins;
  const inset = barW > 6 ? 1 : 0;
  out += `<g shape-rendering="crispEdges">`;
  for (let i = 0; i < bins; i++) {
    let level = 0;
    const bx = left + i * barW + inset;
    const bw = Math.max(0.5, barW - 2 * inset);
    const stack: [number, string][] = binned.admitted[i]!.map((count, k) => [count, `fill="${INSTANCE_COLOURS[k]}"`]);
    stack.push([binned.denied[i]!, `fill="url(#${id}-denied)" stroke="${DENIED_COLOUR}" stroke-width="0.75"`]);
    for (const [count, paint] of stack) {
      if (count === 0) continue;
      const y1 = yOf(level + count);
      const y0 = yOf(level);
      out += `<rect x="${n(bx)}" y="${n(y1)}" width="${n(bw)}" height="${n(y0 - y1)}" ${paint}/>`;
      level += count;
    }
  }
  out += `</g>`;

  // Window boundaries of the window kinds (epoch-aligned), when there are few enough to read.
  if (run.kind !== "token-bucket") {
    const windowMs = result.scenario.params.windowMs;
    const first = Math.ceil((result.originMs + startMs) / windowMs) * windowMs - result.originMs;
    if ((endMs - startMs) / windowMs <= 40) {
      for (let t = first; t <= endMs; t += windowMs) {
        out += `<line x1="${n(xOf(t))}" y1="${n(top - 4)}" x2="${n(xOf(t))}" y2="${
          n(bottom)
        }" stroke="${INK}" stroke-width="1.5" stroke-dasharray="4 3"/>`;
      }
    }
  }

  // The x axis: ticks in seconds from the origin.
  const tickMs = niceStep((endMs - startMs) / 6);
  out += `<line x1="${n(left)}" y1="${n(bottom)}" x2="${n(left + plotW)}" y2="${n(bottom)}" stroke="${MUTED}"/>`;
  out += `<g font-size="11" fill="${MUTED}" text-anchor="middle">`;
  for (let t = Math.ceil(startMs / tickMs) * tickMs; t <= endMs + 1e-9; t += tickMs) {
    out += `<line x1="${n(xOf(t))}" y1="${n(bottom)}" x2="${n(xOf(t))}" y2="${n(bottom + 4)}" stroke="${MUTED}"/>`;
    out += `<text x="${n(xOf(t))}" y="${n(bottom + 16)}">${secondsLabel(t, tickMs)}</text>`;
  }
  out += `</g>`;
  out += `<text x="${n(left + plotW / 2)}" y="${n(bottom + 34)}" font-size="12" fill="${INK}" text-anchor="middle">seconds from ${
    escapeXml(result.originLabel)
  }</text>`;
  const cy = top + plotH / 2;
  out += `<text transform="translate(${n(x + 13)},${n(cy)}) rotate(-90)" font-size="12" fill="${INK}" text-anchor="middle">requests per ${
    escapeXml(formatMs(binMs))
  }</text>`;
  return `${out}</g>`;
}

/** The whole chart as an SVG document. The same result and options always give the same bytes. */
export function renderChart(result: SimulationResult, options: ChartOptions = {}): string {
  const width = options.width ?? 960;
  const columns = Math.max(1, Math.min(options.columns ?? 2, result.runs.length));
  const panelHeight = options.panelHeight ?? 250;
  const id = options.idPrefix ?? "fg";
  const rows = Math.ceil(result.runs.length / columns);
  const titleHeight = options.title === undefined ? 0 : 30;
  const key = legend(result, MARGIN.left, titleHeight + 6, width - MARGIN.left - MARGIN.right, id);
  const legendHeight = key.height;
  const height = titleHeight + legendHeight + rows * panelHeight + (rows - 1) * GAP + 8;
  const panelWidth = (width - (columns - 1) * GAP) / columns;

  const { startMs, binMs, bins } = binsOf(result);
  const instances = result.scenario.instances;
  const binnedRuns = result.runs.map((run) => bin(run, startMs, binMs, bins, instances));
  const max = Math.max(1, ...binnedRuns.map((b) => b.max));
  const yStep = niceStep(max / 5);
  const yMax = Math.ceil(max / yStep) * yStep;

  const summary = result.runs.map((r) => `${r.label}: ${r.admitted} admitted, ${r.denied} denied`).join("; ");
  let out = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${n(width)} ${n(height)}" width="${n(width)}" height="${
    n(height)
  }" role="img" aria-labelledby="${id}-title ${id}-desc" font-family="${escapeXml(FONT)}">`;
  out += `<title id="${id}-title">${escapeXml(options.title ?? "Admitted and denied requests over time")}</title>`;
  out += `<desc id="${id}-desc">${escapeXml(summary)}.</desc>`;
  out +=
    `<defs><pattern id="${id}-denied" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="${DENIED_FILL}"/><line x1="0" y1="0" x2="0" y2="6" stroke="${DENIED_COLOUR}" stroke-width="2.5"/></pattern></defs>`;
  out += `<rect width="100%" height="100%" fill="#FFFFFF"/>`;
  if (options.title !== undefined) {
    out += `<text x="${n(MARGIN.left)}" y="20" font-size="17" font-weight="600" fill="${INK}">${escapeXml(options.title)}</text>`;
  }
  out += key.svg;
  result.runs.forEach((run, i) => {
    const col = i % columns;
    const row = Math.floor(i / columns);
    const x = col * (panelWidth + GAP);
    const y = titleHeight + legendHeight + row * (panelHeight + GAP);
    out += panel(run, result, binnedRuns[i]!, { x, y, width: panelWidth, height: panelHeight, yMax, yStep, startMs, binMs, bins }, id);
  });
  return `${out}</svg>\n`;
}
