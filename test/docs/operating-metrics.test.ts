/**
 * docs/operating.md's metrics table lists exactly the metrics @floodgate/opentelemetry emits, and
 * every attribute it names is one the package sets.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ATTRIBUTES, METRICS } from "../../packages/opentelemetry/src/names.ts";

const text = readFileSync(join(import.meta.dirname, "../../docs/operating.md"), "utf8");
const section = text.slice(text.indexOf("### The metrics"), text.indexOf("### The spans"));

describe("docs/operating.md, Metrics and traces", () => {
  it("the table has one row per metric, no more", () => {
    const rows = [...section.matchAll(/^\| `(floodgate\.[\w.]+)` \|/gm)].map((m) => m[1]).filter((n) =>
      !n!.startsWith("floodgate.decision.outcome")
    );
    const metricRows = rows.filter((n) =>
      (Object.values(METRICS) as string[]).includes(n!) || !(Object.values(ATTRIBUTES) as string[]).includes(n!)
    );
    expect(new Set(metricRows)).toEqual(new Set(Object.values(METRICS)));
  });

  it("every attribute named in the section is one the package sets", () => {
    const named = new Set([...section.matchAll(/`((?:floodgate|error)\.[a-z_.]+)`/g)].map((m) => m[1]!));
    const known = new Set<string>([...Object.values(METRICS), ...Object.values(ATTRIBUTES)]);
    for (const name of named) expect(known.has(name), name).toBe(true);
    for (const attribute of Object.values(ATTRIBUTES)) {
      if (
        !["floodgate.decision.remaining", "floodgate.decision.retry_after", "floodgate.decision.shadow_policy", "floodgate.store.operation"]
          .includes(attribute)
      ) {
        expect(named.has(attribute), attribute).toBe(true);
      }
    }
  });
});
