/**
 * What the docs say the circuit breaker does with its defaults is what it does: every sentence of
 * the user docs (docs/, the READMEs) that speaks of the breaker and gives how long it stops
 * calling the store gives the default cool-down, and every failure count it gives is the default.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_COOLDOWN_MS, DEFAULT_FAILURES } from "../../packages/core/src/stores/resilience/options.ts";

const root = join(import.meta.dirname, "../..");

function markdown(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".md"))
    .map((e) => join(e.parentPath, e.name));
}

const files = [
  ...markdown("docs"),
  join(root, "README.md"),
  ...readdirSync(join(root, "packages")).map((p) => join(root, "packages", p, "README.md")),
];

/** Sentences (across line breaks) that speak of the breaker with its defaults, not of a chosen back-off. */
function breakerSentences(): { file: string; sentence: string }[] {
  const out: { file: string; sentence: string }[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const sentence of text.replace(/\s+/g, " ").split(/(?<=[.!?])\s+/)) {
      if (!/breaker/i.test(sentence)) continue;
      if (/maxCooldownMs|former|doubl|back off|back-off|cooldownMs:/i.test(sentence)) continue;
      out.push({ file: file.slice(root.length + 1), sentence });
    }
  }
  return out;
}

describe("the circuit breaker as the docs describe it", () => {
  it("the sentences that give how long it stops calling the store give the default cool-down", () => {
    const claims = breakerSentences().filter((s) => /stops? calling[^.]*?\bfor (\d+) ?(s|ms|seconds?)\b/i.test(s.sentence));
    for (const { file, sentence } of claims) {
      const [, n, unit] = /stops? calling[^.]*?\bfor (\d+) ?(s|ms|seconds?)\b/i.exec(sentence)!;
      const ms = Number(n) * (unit === "ms" ? 1 : 1000);
      expect(ms, `${file}: ${sentence}`).toBe(DEFAULT_COOLDOWN_MS);
    }
  });

  it("the failure counts they give are the default", () => {
    for (const { file, sentence } of breakerSentences()) {
      for (const m of sentence.matchAll(/after (\d+) (?:consecutive )?failures/gi)) {
        expect(Number(m[1]), `${file}: ${sentence}`).toBe(DEFAULT_FAILURES);
      }
    }
  });

  it("finds the breaker's sentences at all (the check is not vacuous)", () => {
    expect(breakerSentences().length).toBeGreaterThan(10);
    expect(breakerSentences().some((s) => /after 5 consecutive failures|after 5 failures/.test(s.sentence))).toBe(true);
  });
});
