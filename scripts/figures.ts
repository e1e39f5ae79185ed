/**
 * `npm run figures`: renders the figures of docs/choosing-an-algorithm.md from the engine, with
 * the playground's simulator and chart renderer, into docs/figures/. A test regenerates them in
 * memory and fails when a committed file differs.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { renderChart } from "../docs/playground/chart.ts";
import { type Scenario, SEED_SCENARIOS, simulate } from "../docs/playground/simulate.ts";

export const FIGURES_DIR = fileURLToPath(new URL("../docs/figures/", import.meta.url));

interface Figure {
  file: string;
  title: string;
  scenario: Scenario;
}

export const FIGURES: readonly Figure[] = [
  {
    file: "boundary-burst.svg",
    title: "Boundary burst: 100 requests in the second before a window boundary, 100 after",
    scenario: SEED_SCENARIOS["boundary-burst"],
  },
  {
    file: "burst-then-steady.svg",
    title: "Burst then steady: 150 requests at once, then 50 per second",
    scenario: SEED_SCENARIOS["burst-then-steady"],
  },
  {
    file: "retry-storm.svg",
    title: "Retry storm: 60 clients, one request every 2 s each, honouring Retry-After",
    scenario: {
      ...SEED_SCENARIOS["burst-then-steady"],
      pattern: { kind: "retry-storm", clients: 60, thinkMs: 2000, durationS: 30, seed: 1 },
    },
  },
  {
    file: "four-instances.svg",
    title: "Burst then steady on four instances sharing one memory store",
    scenario: { ...SEED_SCENARIOS["burst-then-steady"], instances: 4 },
  },
];

/** Every figure's file name and SVG text, rendered now. */
export function renderFigures(): { file: string; svg: string }[] {
  return FIGURES.map(({ file, title, scenario }) => ({
    file,
    svg: renderChart(simulate(scenario), { title, idPrefix: file.replace(/\.svg$/, "") }),
  }));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  for (const { file, svg } of renderFigures()) {
    writeFileSync(path.join(FIGURES_DIR, file), svg);
    console.log(`wrote docs/figures/${file}`);
  }
}
