// The guide's figures (docs/figures/*.svg) are rendered from the engine by scripts/figures.ts. This
// regenerates each one in memory and fails when the committed file differs by a byte.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { FIGURES, FIGURES_DIR, renderFigures } from "../../scripts/figures.ts";

const UPDATE = "run `npm run figures` and commit docs/figures/";

describe("docs/figures: rendered from the engine, committed up to date", () => {
  for (const { file, svg } of renderFigures()) {
    it(`docs/figures/${file} is what scripts/figures.ts renders now`, () => {
      let committed: string;
      try {
        committed = readFileSync(path.join(FIGURES_DIR, file), "utf8");
      } catch {
        throw new Error(`docs/figures/${file} is missing: ${UPDATE}`);
      }
      if (committed !== svg) {
        throw new Error(`docs/figures/${file} is out of date (the engine, the simulator or the chart changed): ${UPDATE}`);
      }
      expect(committed).toBe(svg);
    });
  }

  it("every SVG in docs/figures is rendered by the script, and the guide shows each one", () => {
    const onDisk = readdirSync(FIGURES_DIR).filter((f) => f.endsWith(".svg")).sort();
    expect(onDisk, `docs/figures holds an SVG the script no longer renders: ${UPDATE} (and delete the stale file)`).toEqual(
      FIGURES.map((f) => f.file).sort(),
    );
    const guide = readFileSync(path.join(FIGURES_DIR, "..", "choosing-an-algorithm.md"), "utf8");
    for (const { file } of FIGURES) expect(guide, file).toContain(`(figures/${file})`);
  });

  it("the same scenario renders the same bytes, and a changed one different bytes", () => {
    expect(renderFigures()).toEqual(renderFigures());
    const [first, second] = renderFigures();
    expect(first!.svg).not.toBe(second!.svg);
  });
});
