/**
 * The playground page: reads the controls into a scenario, runs it through the simulator (the real
 * engine, on simulated time) and shows the chart and the counts. Re-runs on every change.
 */
import type { PolicyKind } from "@floodgate/core";
import { calendarMonth } from "./calendar.ts";
import { compoundRun, parseRequests } from "./compound.ts";
import { renderChart } from "./chart.ts";
import {
  ALGORITHMS,
  DEFAULT_PATTERNS,
  parseTimestamps,
  type Pattern,
  type PatternKind,
  type Scenario,
  SEED_SCENARIOS,
  type SeedName,
  simulate,
  type SimulationResult,
} from "./simulate.ts";

const element = <T extends HTMLElement>(id: string): T => {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page has no #${id}`);
  return found as T;
};
const input = (id: string): HTMLInputElement => element<HTMLInputElement>(id);
const numberOf = (id: string): number => (input(id).value.trim() === "" ? Number.NaN : Number(input(id).value));
const setNumber = (id: string, value: number): void => {
  input(id).value = String(+value.toFixed(6));
};

/** Each pattern's controls, remembered while another pattern is shown. */
const patterns: Record<PatternKind, Pattern> = { ...DEFAULT_PATTERNS };

function readPattern(kind: PatternKind): Pattern {
  switch (kind) {
    case "boundary":
      return { kind, perSide: numberOf("boundary-per-side"), spreadMs: numberOf("boundary-spread") };
    case "burst-then-steady":
      return { kind, burst: numberOf("bts-burst"), ratePerS: numberOf("bts-rate"), durationS: numberOf("bts-duration") };
    case "poisson":
      return { kind, ratePerS: numberOf("poisson-rate"), durationS: numberOf("poisson-duration"), seed: numberOf("poisson-seed") };
    case "retry-storm":
      return {
        kind,
        clients: numberOf("storm-clients"),
        thinkMs: numberOf("storm-think"),
        durationS: numberOf("storm-duration"),
        seed: numberOf("storm-seed"),
      };
    case "custom":
      return { kind, timesMs: parseTimestamps(element<HTMLTextAreaElement>("custom-times").value) };
  }
}

function writePattern(pattern: Pattern): void {
  switch (pattern.kind) {
    case "boundary":
      setNumber("boundary-per-side", pattern.perSide);
      setNumber("boundary-spread", pattern.spreadMs);
      break;
    case "burst-then-steady":
      setNumber("bts-burst", pattern.burst);
      setNumber("bts-rate", pattern.ratePerS);
      setNumber("bts-duration", pattern.durationS);
      break;
    case "poisson":
      setNumber("poisson-rate", pattern.ratePerS);
      setNumber("poisson-duration", pattern.durationS);
      setNumber("poisson-seed", pattern.seed);
      break;
    case "retry-storm":
      setNumber("storm-clients", pattern.clients);
      setNumber("storm-think", pattern.thinkMs);
      setNumber("storm-duration", pattern.durationS);
      setNumber("storm-seed", pattern.seed);
      break;
    case "custom":
      element<HTMLTextAreaElement>("custom-times").value = pattern.timesMs.join(", ");
      break;
  }
}

const patternKind = (): PatternKind => element<HTMLSelectElement>("pattern").value as PatternKind;

function showPattern(kind: PatternKind): void {
  for (const group of document.querySelectorAll<HTMLElement>(".pattern")) group.hidden = group.dataset["pattern"] !== kind;
}

/** The scenario the controls describe (may be invalid: the simulator says what is wrong). */
export function readScenario(): Scenario {
  const algorithm = element<HTMLSelectElement>("algorithm").value;
  return {
    params: {
      capacity: numberOf("capacity"),
      refillTokens: numberOf("refill-tokens"),
      refillPeriodMs: numberOf("refill-period") * 1000,
      limit: numberOf("limit"),
      windowMs: numberOf("window") * 1000,
    },
    pattern: readPattern(patternKind()),
    instances: Number(element<HTMLSelectElement>("instances").value),
    separateStores: input("separate-stores").checked,
    algorithms: algorithm === "all" ? ALGORITHMS : [algorithm as PolicyKind],
  };
}

function writeScenario(scenario: Scenario): void {
  setNumber("capacity", scenario.params.capacity);
  setNumber("refill-tokens", scenario.params.refillTokens);
  setNumber("refill-period", scenario.params.refillPeriodMs / 1000);
  setNumber("limit", scenario.params.limit);
  setNumber("window", scenario.params.windowMs / 1000);
  patterns[scenario.pattern.kind] = scenario.pattern;
  for (const pattern of Object.values(patterns)) writePattern(pattern);
  element<HTMLSelectElement>("pattern").value = scenario.pattern.kind;
  showPattern(scenario.pattern.kind);
  element<HTMLSelectElement>("instances").value = String(scenario.instances);
  input("separate-stores").checked = scenario.separateStores === true;
  element<HTMLSelectElement>("algorithm").value = scenario.algorithms?.length === 1 ? scenario.algorithms[0]! : "all";
}

function showCounts(result: SimulationResult): void {
  const body = element<HTMLTableElement>("counts").tBodies[0]!;
  body.replaceChildren(
    ...result.runs.map((run) => {
      const row = document.createElement("tr");
      row.dataset["algorithm"] = run.kind;
      const cell = (text: string, className?: string): HTMLTableCellElement => {
        const td = document.createElement("td");
        td.textContent = text;
        if (className !== undefined) td.className = className;
        return td;
      };
      const name = document.createElement("th");
      name.scope = "row";
      name.textContent = run.label;
      row.append(
        name,
        cell(run.description, "policy"),
        cell(String(run.admitted), "num admitted"),
        cell(String(run.denied), "num denied"),
        cell(run.perInstance.map((c) => c.admitted).join(" / "), "per-instance"),
      );
      return row;
    }),
  );
}

let runs = 0;

function update(): void {
  const error = element("error");
  const chart = element("chart");
  try {
    const result = simulate(readScenario());
    // Drawn at the container's width, so its text stays readable on a narrow screen.
    const width = Math.round(Math.max(340, Math.min(1100, chart.clientWidth - 24)));
    chart.innerHTML = renderChart(result, { idPrefix: "playground", width, columns: result.runs.length === 1 || width < 720 ? 1 : 2 });
    showCounts(result);
    error.hidden = true;
    error.textContent = "";
    chart.classList.remove("stale");
    runs++;
    document.body.dataset["runs"] = String(runs);
  } catch (e) {
    // Both the simulator's and core's errors say what was wrong and what is accepted.
    error.textContent = e instanceof Error ? e.message : String(e);
    error.hidden = false;
    chart.classList.add("stale");
  }
}

function start(): void {
  const form = element<HTMLFormElement>("controls");
  writeScenario(SEED_SCENARIOS["boundary-burst"]);
  form.addEventListener("input", (event) => {
    if (event.target === element("pattern")) {
      showPattern(patternKind());
    }
    update();
  });
  form.addEventListener("submit", (event) => event.preventDefault());
  for (const button of document.querySelectorAll<HTMLButtonElement>("[data-seed]")) {
    button.addEventListener("click", () => {
      writeScenario(SEED_SCENARIOS[button.dataset["seed"] as SeedName]);
      update();
    });
  }
  let resizing = 0;
  let lastWidth = element("chart").clientWidth;
  globalThis.addEventListener("resize", () => {
    cancelAnimationFrame(resizing);
    resizing = requestAnimationFrame(() => {
      if (element("chart").clientWidth === lastWidth) return;
      lastWidth = element("chart").clientWidth;
      update();
    });
  });
  update();
}

/** The calendar panel: the chosen month's local days and billing cycle, from the engine. */
async function updateCalendar(): Promise<void> {
  const [year, month] = input("cal-month").value.split("-").map(Number) as [number, number];
  const billingDay = Math.min(31, Math.max(1, Math.round(numberOf("cal-billing")) || 1));
  if (!(year > 1970 && month >= 1 && month <= 12)) return;
  const zone = element<HTMLSelectElement>("cal-zone").value;
  const { days, cycle } = await calendarMonth(zone, year, month, billingDay);
  const utc = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace("T", " ");
  element("cal-cycle").textContent = `The billing cycle on day ${billingDay} containing the 15th starts ${cycle.label} local (${
    utc(cycle.startMs)
  } UTC) and lasts ${cycle.hours} hours.`;
  const body = element("cal-days").querySelector("tbody")!;
  body.replaceChildren(...days.map((d) => {
    const row = document.createElement("tr");
    if (d.hours !== 24) row.className = "dst";
    for (const [text, numeric] of [[d.label, false], [utc(d.startMs), false], [String(d.hours), true]] as const) {
      const cell = document.createElement("td");
      cell.textContent = text;
      if (numeric) cell.className = "num";
      row.append(cell);
    }
    return row;
  }));
}

function startCalendar(): void {
  for (const id of ["cal-zone", "cal-month", "cal-billing"]) element(id).addEventListener("change", () => void updateCalendar());
  void updateCalendar();
}

/** The compound panel: the requests through a rule over user, organisation and service, as the HTTP layer decides them. */
async function updateCompound(): Promise<void> {
  const summary = element("cmp-summary");
  const body = element("cmp-rows").querySelector("tbody")!;
  let rows;
  try {
    rows = await compoundRun(
      { user: numberOf("cmp-user"), org: numberOf("cmp-org"), global: numberOf("cmp-global") },
      parseRequests(input("cmp-requests").value),
    );
  } catch (error) {
    summary.textContent = error instanceof Error ? error.message : String(error);
    summary.className = "error";
    body.replaceChildren();
    return;
  }
  const refused = rows.filter((r) => r.status === 429);
  const by = (d: string): number => refused.filter((r) => r.dimension === d).length;
  summary.className = "";
  summary.textContent = `${rows.length - refused.length} admitted, ${refused.length} refused: ${by("user")} by the user's limit, ${
    by("org")
  } by the organisation's, ${by("global")} by the service's.`;
  body.replaceChildren(...rows.map((r) => {
    const row = document.createElement("tr");
    row.className = r.status === 429 ? "refused" : "admitted";
    row.dataset["dimension"] = r.dimension;
    const cells = [[`${r.user}@${r.org}`, false], [String(r.status), true], [r.dimension, false], [String(r.left.user), true], [
      String(r.left.org),
      true,
    ], [String(r.left.global), true]] as const;
    for (const [text, numeric] of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      if (numeric) cell.className = "num";
      row.append(cell);
    }
    return row;
  }));
}

function startCompound(): void {
  for (const id of ["cmp-user", "cmp-org", "cmp-global", "cmp-requests"]) {
    element(id).addEventListener("change", () => void updateCompound());
  }
  void updateCompound();
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
  document.addEventListener("DOMContentLoaded", startCalendar);
  document.addEventListener("DOMContentLoaded", startCompound);
} else {
  start();
  startCalendar();
  startCompound();
}
