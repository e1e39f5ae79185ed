/** The Redis key of an identifier, as the bytes a client sends (UTF-8): distinct identifiers never share one. */
import fc from "fast-check";
import { expect, it } from "vitest";
import { baseKey } from "../../packages/core/src/stores/redis/script-store.ts";

const utf8 = (s: string): string => Buffer.from(s, "utf8").toString("hex");
// Identifiers built from the characters that matter: escapes, braces, separators, surrogates (paired or not), U+FFFD.
const idArb = fc
  .array(
    fc.constantFrom("%", "}", "{", ":", "7", "D", "2", "5", "u", "\uD800", "\uDC00", "\uDBFF", "\uDFFF", "\uFFFD", "\u{1F600}", "é", "a"),
    { minLength: 1, maxLength: 8 },
  )
  .map((parts) => parts.join(""));

it("distinct identifiers give distinct key bytes", () => {
  fc.assert(
    fc.property(idArb, idArb, (a, b) => {
      if (a !== b) expect(utf8(baseKey("fg:", a))).not.toBe(utf8(baseKey("fg:", b)));
    }),
    { numRuns: 20_000 },
  );
});

it("an identifier with a lone surrogate does not spell one with U+FFFD", () => {
  expect(utf8(baseKey("fg:", "victim\uD800"))).not.toBe(utf8(baseKey("fg:", "victim\uFFFD")));
  expect(baseKey("fg:", "a\uD83D\uDE00")).toBe("fg:{a\u{1F600}}");
});
