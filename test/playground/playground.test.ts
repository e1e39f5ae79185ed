// The playground page in a real browser: its script bundled from core's dist (as `npm run
// playground` builds it), docs/ served by the playground's own static server on 127.0.0.1, driven
// in headless Chromium (Debian's `chromium`, through playwright-core). The page's counts must equal
// the engine's, computed here in Node by the same simulator; changing a control must change the
// chart and the counts. Screenshots for review go to .tmp/playground/ (git-ignored).
// Fails (never skips) when Chromium is missing: `apt-get install -y chromium`.
//   npx vitest run test/playground/playground.test.ts
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Scenario, SEED_SCENARIOS, type SeedName, simulate } from "../../docs/playground/simulate.ts";
import { compoundRun, parseRequests } from "../../docs/playground/compound.ts";
import {
  bundlePlayground,
  DOCS_DIR,
  PLAYGROUND_PATH,
  type PlaygroundBundle,
  serveStatic,
  type StaticServer,
} from "../../scripts/playground-build.ts";
import { requireBuilt, requireChromium, requirePackage, ROOT } from "../runtimes/support.ts";

const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"];
const SCREENSHOTS = path.join(ROOT, ".tmp", "playground");

let browser: Browser | undefined;
let server: StaticServer | undefined;
let page: Page;
let bundle: PlaygroundBundle;
const pageErrors: string[] = [];
const consoleErrors: string[] = [];

// A missing browser or build fails every test (a failing beforeAll would only mark them skipped).
let setupError: unknown;
beforeAll(async () => {
  try {
    const executablePath = requireChromium();
    const { chromium } = await requirePackage("playwright-core", () => import("playwright-core"));
    requireBuilt(["core"]);
    bundle = await bundlePlayground();
    server = await serveStatic(DOCS_DIR, 0, { [`${PLAYGROUND_PATH}dist/playground.js`]: bundle.code });
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
    page.on("pageerror", (error) => pageErrors.push(String(error)));
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    await page.goto(`${server.url}${PLAYGROUND_PATH}`, { waitUntil: "load" });
    await page.waitForSelector("#chart svg");
  } catch (error) {
    setupError = error;
  }
});
beforeEach(() => {
  if (setupError !== undefined) throw setupError;
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

interface Counts {
  kind: string;
  admitted: number;
  denied: number;
  perInstance: number[];
}

/** The counts table, as the page shows it. */
const pageCounts = (): Promise<Counts[]> =>
  page.$$eval("#counts tbody tr", (rows) =>
    rows.map((row) => ({
      kind: (row as HTMLElement).dataset["algorithm"]!,
      admitted: Number(row.querySelector(".admitted")!.textContent),
      denied: Number(row.querySelector(".denied")!.textContent),
      perInstance: row.querySelector(".per-instance")!.textContent!.split(" / ").map(Number),
    })));

/** The same figures from the engine in Node, through the same simulator. */
const engineCounts = (scenario: Scenario): Counts[] =>
  simulate(scenario).runs.map((run) => ({
    kind: run.kind,
    admitted: run.admitted,
    denied: run.denied,
    perInstance: run.perInstance.map((c) => c.admitted),
  }));

const chartSvg = (): Promise<string> => page.$eval("#chart", (chart) => chart.innerHTML);
const panelsShown = (): Promise<string[]> =>
  page.$$eval("#chart svg .panel", (panels) => panels.map((p) => (p as SVGElement).dataset["algorithm"]!));
const errorShown = (): Promise<string | null> => page.$eval("#error", (e) => ((e as HTMLElement).hidden ? null : e.textContent));

async function loadSeed(seed: SeedName): Promise<void> {
  await page.click(`[data-seed="${seed}"]`);
}

async function screenshot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

describe("playground page (headless Chromium): the real engine from core's dist, on simulated time", () => {
  it("loads one classic script bundled from core's dist (no source, no node:*) and draws a chart with no error", async () => {
    expect(bundle.inputs).toContain("packages/core/dist/index.js");
    expect(bundle.inputs.some((f) => f.startsWith("packages/") && f.includes("/src/"))).toBe(false);
    expect(bundle.inputs.some((f) => f.startsWith("node:"))).toBe(false);
    expect(bundle.code).not.toMatch(/^\s*(import|export)\s/m);
    expect(await page.evaluate("[typeof process, typeof require]")).toEqual(["undefined", "undefined"]);
    expect(await panelsShown()).toEqual(["token-bucket", "sliding-window", "fixed-window", "sliding-log"]);
    expect(pageErrors).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });

  for (const seed of Object.keys(SEED_SCENARIOS) as SeedName[]) {
    it(`seed scenario "${seed}": the page's counts equal the engine's in Node`, async () => {
      await loadSeed(seed);
      const expected = engineCounts(SEED_SCENARIOS[seed]);
      expect(await pageCounts()).toEqual(expected);
      // The chart's panels carry the same counts.
      const headings = await page.$$eval("#chart svg .panel > text:nth-of-type(2)", (texts) => texts.map((t) => t.textContent));
      expect(headings).toEqual(expected.map((c) => `admitted ${c.admitted} · denied ${c.denied}`));
      expect(await errorShown()).toBeNull();
      await screenshot(seed);
    });
  }

  it("the seed scenarios show what the guide says: the fixed window admits twice its limit across a boundary, the sliding log exactly its limit", async () => {
    await loadSeed("boundary-burst");
    const byKind = Object.fromEntries((await pageCounts()).map((c) => [c.kind, c.admitted]));
    expect(byKind).toEqual({ "token-bucket": 103, "sliding-window": 101, "fixed-window": 200, "sliding-log": 100 });
  });

  it("changing a token bucket parameter changes its counts and the chart, to the engine's figures", async () => {
    await loadSeed("boundary-burst");
    const before = await chartSvg();
    const countsBefore = await pageCounts();
    await page.fill("#capacity", "150");
    const expected = engineCounts({
      ...SEED_SCENARIOS["boundary-burst"],
      params: { ...SEED_SCENARIOS["boundary-burst"].params, capacity: 150 },
    });
    expect(await pageCounts()).toEqual(expected);
    expect(expected[0]!.admitted).toBeGreaterThan(countsBefore[0]!.admitted);
    // Only the token bucket's figures moved.
    expect(expected.slice(1)).toEqual(countsBefore.slice(1));
    expect(await chartSvg()).not.toBe(before);
  });

  it("changing the window changes the window algorithms' counts and the chart", async () => {
    await loadSeed("burst-then-steady");
    const before = await chartSvg();
    await page.fill("#limit", "40");
    await page.fill("#window", "2");
    const params = { ...SEED_SCENARIOS["burst-then-steady"].params, limit: 40, windowMs: 2000 };
    const expected = engineCounts({ ...SEED_SCENARIOS["burst-then-steady"], params });
    expect(await pageCounts()).toEqual(expected);
    expect(expected.find((c) => c.kind === "fixed-window")!.admitted).not.toBe(
      engineCounts(SEED_SCENARIOS["burst-then-steady"]).find((c) => c.kind === "fixed-window")!.admitted,
    );
    expect(await chartSvg()).not.toBe(before);
  });

  it("each traffic pattern changes the chart and the counts, to the engine's figures", async () => {
    await loadSeed("boundary-burst");
    const params = SEED_SCENARIOS["boundary-burst"].params;
    const seen = new Set<string>([await chartSvg()]);
    const patterns: Scenario["pattern"][] = [
      { kind: "burst-then-steady", burst: 150, ratePerS: 50, durationS: 12 },
      { kind: "poisson", ratePerS: 20, durationS: 30, seed: 1 },
      { kind: "retry-storm", clients: 60, thinkMs: 2000, durationS: 30, seed: 1 },
      { kind: "custom", timesMs: [0, 100, 200, 300, 59_900, 59_950, 60_000, 60_050, 60_100, 90_000] },
    ];
    for (const pattern of patterns) {
      await page.selectOption("#pattern", pattern.kind);
      expect(await page.isVisible(`.pattern[data-pattern="${pattern.kind}"]`)).toBe(true);
      expect(await page.isVisible(`.pattern[data-pattern="boundary"]`)).toBe(false);
      expect(await pageCounts(), pattern.kind).toEqual(engineCounts({ params, pattern, instances: 1 }));
      const svg = await chartSvg();
      expect(seen.has(svg), `${pattern.kind} drew a chart already seen`).toBe(false);
      seen.add(svg);
      await screenshot(`pattern-${pattern.kind}`);
    }
    // A pattern's own controls: another Poisson seed is other traffic.
    await page.selectOption("#pattern", "poisson");
    const poisson = await pageCounts();
    await page.fill("#poisson-seed", "7");
    expect(await pageCounts()).toEqual(
      engineCounts({ params, pattern: { kind: "poisson", ratePerS: 20, durationS: 30, seed: 7 }, instances: 1 }),
    );
    expect(await pageCounts()).not.toEqual(poisson);
    // Custom timestamps typed in.
    await page.selectOption("#pattern", "custom");
    await page.fill("#custom-times", "0, 10\n20 30");
    expect(await pageCounts()).toEqual(engineCounts({ params, pattern: { kind: "custom", timesMs: [0, 10, 20, 30] }, instances: 1 }));
  });

  it("instances sharing one store: per-instance counts add up to one shared limit; separate stores admit more", async () => {
    await loadSeed("burst-then-steady");
    const single = await pageCounts();
    const before = await chartSvg();
    await page.selectOption("#instances", "4");
    const shared = await pageCounts();
    expect(shared).toEqual(engineCounts({ ...SEED_SCENARIOS["burst-then-steady"], instances: 4 }));
    for (const [i, c] of shared.entries()) {
      expect(c.perInstance).toHaveLength(4);
      expect(c.perInstance.reduce((a, b) => a + b, 0)).toBe(c.admitted);
      // One shared limit: the same totals as one instance.
      expect([c.admitted, c.denied]).toEqual([single[i]!.admitted, single[i]!.denied]);
    }
    expect(await chartSvg()).not.toBe(before);
    expect(await page.textContent("#chart svg .legend")).toContain("admitted by instance 4");
    await screenshot("four-instances");

    await page.check("#separate-stores");
    const separate = await pageCounts();
    expect(separate).toEqual(engineCounts({ ...SEED_SCENARIOS["burst-then-steady"], instances: 4, separateStores: true }));
    for (const [i, c] of separate.entries()) expect(c.admitted).toBeGreaterThan(shared[i]!.admitted);
  });

  it("one algorithm alone: one panel and one row", async () => {
    await loadSeed("boundary-burst");
    await page.selectOption("#algorithm", "sliding-log");
    expect(await panelsShown()).toEqual(["sliding-log"]);
    expect(await pageCounts()).toEqual(engineCounts({ ...SEED_SCENARIOS["boundary-burst"], algorithms: ["sliding-log"] }));
    await page.selectOption("#algorithm", "all");
    expect(await panelsShown()).toHaveLength(4);
  });

  it("a bad value shows core's or the simulator's message and dims the chart; a good one restores it", async () => {
    await loadSeed("boundary-burst");
    await page.fill("#capacity", "0");
    expect(await errorShown()).toMatch(/capacity/);
    expect(await page.$eval("#chart", (c) => c.classList.contains("stale"))).toBe(true);
    await page.fill("#capacity", "100");
    expect(await errorShown()).toBeNull();
    await page.selectOption("#pattern", "custom");
    await page.fill("#custom-times", "0, soon");
    expect(await errorShown()).toMatch(/"soon" is not a number/);
    await loadSeed("boundary-burst");
    expect(await errorShown()).toBeNull();
    expect(await pageCounts()).toEqual(engineCounts(SEED_SCENARIOS["boundary-burst"]));
  });

  it("the calendar panel shows March 2026 in Berlin with its 23-hour day, and Lord Howe's 23.5-hour day in October", async () => {
    const rows = () =>
      page.$$eval(
        "#cal-days tbody tr",
        (trs) => trs.map((tr) => [tr.className, ...[...tr.querySelectorAll("td")].map((td) => td.textContent)]),
      );
    await page.waitForSelector("#cal-days tbody tr");
    const march = await rows();
    expect(march.length).toBe(31);
    expect(march.filter((r) => r[0] === "dst")).toEqual([["dst", "2026-03-29, 00:00", "2026-03-28 23:00", "23"]]);
    expect(await page.textContent("#cal-cycle")).toMatch(/starts 2026-02-28, 00:00 local \(2026-02-27 23:00 UTC\) and lasts 743 hours/);
    await page.selectOption("#cal-zone", "Australia/Lord_Howe");
    await page.fill("#cal-month", "2026-10");
    await page.dispatchEvent("#cal-month", "change");
    await page.waitForFunction(() => document.querySelector("#cal-days tbody tr.dst td:last-child")?.textContent === "23.5");
    await screenshot("calendar-lord-howe");
  });

  it("the compound panel shows each request's outcome and binding dimension, as the HTTP layer decides them in Node", async () => {
    const rows = () =>
      page.$$eval("#cmp-rows tbody tr", (trs) => trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
    const inNode = async () =>
      (await compoundRun(
        {
          user: Number(await page.inputValue("#cmp-user")),
          org: Number(await page.inputValue("#cmp-org")),
          global: Number(await page.inputValue("#cmp-global")),
        },
        parseRequests(await page.inputValue("#cmp-requests")),
      )).map((r) => [`${r.user}@${r.org}`, String(r.status), r.dimension, String(r.left.user), String(r.left.org), String(r.left.global)]);
    await page.waitForSelector("#cmp-rows tbody tr");
    const shown = await rows();
    expect(shown).toEqual(await inNode());
    expect(shown.filter((r) => r[1] === "429").map((r) => r[2])).toEqual(["user", "org", "global", "global"]);
    expect(await page.textContent("#cmp-summary")).toBe(
      "8 admitted, 4 refused: 1 by the user's limit, 1 by the organisation's, 2 by the service's.",
    );
    await screenshot("compound");
    // A service limit of 20: dave's requests go on, and the page follows.
    await page.fill("#cmp-global", "20");
    await page.dispatchEvent("#cmp-global", "change");
    await page.waitForFunction(() => document.querySelector("#cmp-summary")?.textContent?.startsWith("10 admitted"));
    expect(await rows()).toEqual(await inNode());
  });

  it("the page logged no error and threw nothing", () => {
    expect(pageErrors).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
