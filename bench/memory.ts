/**
 * Heap per tracked key at 1,000,000 distinct keys. Run: `npm run bench:memory`
 * (node --expose-gc --import tsx bench/memory.ts).
 *
 * Each subject runs in a fresh child process: the 1,000,000 key strings are built first (they
 * belong to the requests, not to the store, and are in the baseline), then gc, then one decision
 * per key, then gc again. Bytes per key = (heapUsed + arrayBuffers after − before) / 1,000,000:
 * `arrayBuffers` counts the memory store's Float64Array slabs, which live outside the JS heap.
 * The second column also counts the key strings themselves ("user:0" … "user:999999", about
 * 32 B each), which every store must keep; the first column is what the store adds on top.
 * Everything the subject retains is counted (maps, slabs, logs, timers, Date objects).
 *
 * Floodgate: `memoryStore({ maxKeys: 1_000_000 })` (the default bound, 100,000, would evict),
 * a fixed clock, one admitted request per key. Peers: rate-limiter-flexible `RateLimiterMemory`
 * (consume), express-rate-limit `MemoryStore` (increment), and a `Map<string, number>`.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { MemoryStore } from "express-rate-limit";
import { createRateLimiter, fixedWindow, memoryStore, slidingLog, slidingWindow, tokenBucket } from "../packages/core/src/index.ts";

const KEYS = 1_000_000;
const SUBJECTS = [
  "tokenBucket",
  "slidingWindow",
  "fixedWindow",
  "slidingLog",
  "rate-limiter-flexible RateLimiterMemory",
  "express-rate-limit MemoryStore",
  "Map<string, number>",
] as const;
type Subject = (typeof SUBJECTS)[number];

function subject(name: Subject): { call(key: string): unknown; keep: unknown } {
  const floodgate = (policy: Parameters<typeof createRateLimiter>[0]["policy"]) => {
    const limiter = createRateLimiter({ policy, store: memoryStore({ maxKeys: KEYS }), clock: () => 1_700_000_000_000 });
    return { call: (key: string) => limiter.limit(key), keep: limiter };
  };
  switch (name) {
    case "tokenBucket":
      return floodgate(tokenBucket({ capacity: 100, refillRate: 100 / 60 }));
    case "slidingWindow":
      return floodgate(slidingWindow({ limit: 100, window: "1m" }));
    case "fixedWindow":
      return floodgate(fixedWindow({ limit: 100, window: "1m" }));
    case "slidingLog":
      return floodgate(slidingLog({ limit: 100, window: "1m" }));
    case "rate-limiter-flexible RateLimiterMemory": {
      const rlf = new RateLimiterMemory({ points: 100, duration: 60 });
      return { call: (key) => rlf.consume(key), keep: rlf };
    }
    case "express-rate-limit MemoryStore": {
      const store = new MemoryStore();
      store.init({ windowMs: 60_000 } as Parameters<MemoryStore["init"]>[0]);
      return { call: (key) => store.increment(key), keep: store };
    }
    case "Map<string, number>": {
      const map = new Map<string, number>();
      return { call: (key) => map.set(key, (map.get(key) ?? 0) + 1), keep: map };
    }
  }
}

async function measure(name: Subject): Promise<{ store: number; withKeys: number }> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with node --expose-gc");
  const used = (): number => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const empty = used();
  const keys = Array.from({ length: KEYS }, (_, i) => `user:${i}`);
  const before = used();
  const s = subject(name);
  for (const key of keys) await s.call(key);
  const after = used();
  if (keys.length !== KEYS || s.keep === undefined) throw new Error("unreachable");
  // The keys array's own 8-byte slots belong to the harness, not to the keys.
  return { store: (after - before) / KEYS, withKeys: (after - empty - KEYS * 8) / KEYS };
}

const child = process.argv[2];
if (child !== undefined) {
  console.log(JSON.stringify(await measure(child as Subject)));
  process.exit(0);
}

console.log(
  `node ${process.version}, ${process.platform}/${process.arch}; bytes per tracked key at ${
    KEYS.toLocaleString("en-US")
  } keys (heapUsed + arrayBuffers delta after gc); target <= 120 B for the memory store\n`,
);
console.log(`| ${"subject".padEnd(40)} | bytes/key | with key strings |`);
console.log(`|${"-".repeat(42)}|-----------|------------------|`);
for (const name of SUBJECTS) {
  const out = execFileSync(process.execPath, [
    "--expose-gc",
    "--max-old-space-size=4096",
    "--import",
    "tsx",
    fileURLToPath(import.meta.url),
    name,
  ], {
    encoding: "utf8",
  });
  const { store, withKeys } = JSON.parse(out.trim().split("\n").pop()!) as { store: number; withKeys: number };
  console.log(`| ${name.padEnd(40)} | ${store.toFixed(1).padStart(9)} | ${withKeys.toFixed(1).padStart(16)} |`);
}
