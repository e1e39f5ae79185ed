// SHA-256 (FIPS 180-4) in plain TypeScript: synchronous, and on every runtime core supports
// (Web Crypto's digest is asynchronous, and `globalThis.crypto` is missing on Node 18 without a flag).

/** The first `n` primes. */
function primes(n: number): number[] {
  const found: number[] = [];
  for (let c = 2; found.length < n; c++) if (found.every((p) => c % p !== 0)) found.push(c);
  return found;
}

/** The first 32 bits of the fractional part of `x` (exact here: doubles carry 50 bits of it). */
const fraction32 = (x: number): number => ((x - Math.floor(x)) * 0x1_0000_0000) >>> 0;

// The standard's constants, derived as the standard defines them (cube and square roots of the
// first primes) rather than spelled out in hex: 300 bytes less in every bundle. The test vectors
// in the tests pin them.
let K: Uint32Array | undefined;
let H0: Uint32Array | undefined;

/** The SHA-256 digest of `bytes`, as 64 lower-case hex digits. */
export function sha256Hex(bytes: Uint8Array): string {
  const bitLength = bytes.length * 8;
  // The message, a 1 bit, zeros, and the 64-bit length: a whole number of 64-byte blocks.
  const padded = new Uint8Array(((bytes.length + 9 + 63) >> 6) << 6);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bitLength / 0x1_0000_0000));
  view.setUint32(padded.length - 4, bitLength >>> 0);
  if (K === undefined || H0 === undefined) {
    const p = primes(64);
    K = new Uint32Array(p.map((q) => fraction32(Math.cbrt(q))));
    H0 = new Uint32Array(p.slice(0, 8).map((q) => fraction32(Math.sqrt(q))));
  }
  const k32 = K;
  const h = H0.slice();
  const w = new Uint32Array(64);
  for (let block = 0; block < padded.length; block += 64) {
    for (let t = 0; t < 16; t++) w[t] = view.getUint32(block + t * 4);
    for (let t = 16; t < 64; t++) {
      const a = w[t - 15]!, b = w[t - 2]!;
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[t] = (w[t - 16]! + s0 + w[t - 7]! + s1) | 0;
    }
    let a = h[0]!, b = h[1]!, c = h[2]!, d = h[3]!, e = h[4]!, f = h[5]!, g = h[6]!, k = h[7]!;
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (k + S1 + ((e & f) ^ (~e & g)) + k32[t]! + w[t]!) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = h[0]! + a;
    h[1] = h[1]! + b;
    h[2] = h[2]! + c;
    h[3] = h[3]! + d;
    h[4] = h[4]! + e;
    h[5] = h[5]! + f;
    h[6] = h[6]! + g;
    h[7] = h[7]! + k;
  }
  let hex = "";
  for (let i = 0; i < 8; i++) hex += h[i]!.toString(16).padStart(8, "0");
  return hex;
}

/** The UTF-16 code units of `text`, little-endian: exact for any string, lone surrogates included. */
export function utf16Bytes(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    bytes[2 * i] = unit & 0xff;
    bytes[2 * i + 1] = unit >>> 8;
  }
  return bytes;
}
