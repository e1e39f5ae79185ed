// SHA-256 against the standard's test vectors (FIPS 180-4 examples, NIST's "one million a"), on
// every runtime the portable suites run on: its constants are derived at run time from roots.
import { describe, expect, it } from "vitest";
import { sha256Hex, utf16Bytes } from "../../packages/core/src/sha256.ts";

const ascii = (text: string): Uint8Array => Uint8Array.from(text, (c) => c.charCodeAt(0));

describe("sha256Hex", () => {
  it.each([
    ["", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
    ["abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"],
    ["abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"],
    [
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
    ],
    ["a".repeat(1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"],
  ])("digests a %#-th standard message", (message, digest) => {
    expect(sha256Hex(ascii(message))).toBe(digest);
  });

  it("digests every padding length around a block boundary differently", () => {
    const digests = new Set<string>();
    for (let n = 50; n < 70; n++) digests.add(sha256Hex(ascii("x".repeat(n))));
    expect(digests.size).toBe(20);
  });

  it("reads a string's UTF-16 code units little-endian, lone surrogates included", () => {
    expect([...utf16Bytes("\uD800a\u00e9")]).toEqual([0x00, 0xd8, 0x61, 0x00, 0xe9, 0x00]);
    expect(sha256Hex(utf16Bytes("\uD800a\u00e9"))).toBe("f2ac98a705576cf6f4c5b5596bc94cbc03c433814a43f62bb167a585fbc69cff");
  });
});
