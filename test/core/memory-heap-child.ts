/**
 * Run by memory-store-heap.test.ts as `node --expose-gc --import tsx test/core/memory-heap-child.ts <keys>`:
 * the heap a memory store holds per tracked key (one token bucket, one admitted request per key),
 * beside the floor of the same keys in a bare `Map<string, number>`, both after a full gc and in
 * this one process. Prints one JSON line: bytes per key of each, and of the store's state slab.
 */
import { createRateLimiter, memoryStore, tokenBucket } from "../../packages/core/src/index.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node --expose-gc");
const heap = (): number => {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

const n = Number(process.argv[2] ?? "200000");
const keys = Array.from({ length: n }, (_, i) => `user:${i}`);
const policy = tokenBucket({ capacity: 100, refillRate: 100 / 60 });

// Every lazily built part (compiled code, caches) first, so that neither figure includes it.
const warm = createRateLimiter({ policy, store: memoryStore({ maxKeys: 1_000 }), clock: () => 1_700_000_000_000 });
for (let i = 0; i < 2_000; i++) warm.decide(keys[i % keys.length]!);
// Kept alive to the end: an object the code no longer uses could be collected inside a figure.
const keep: unknown[] = [warm, keys];
heap();

let start = heap();
const map = new Map<string, number>();
for (let i = 0; i < n; i++) map.set(keys[i]!, i * 256);
const mapBytes = heap() - start;
keep.push(map);

start = heap();
const store = memoryStore({ maxKeys: n });
const limiter = createRateLimiter({ policy, store, clock: () => 1_700_000_000_000 });
for (const key of keys) limiter.decide(key);
const storeBytes = heap() - start;
keep.push(store, limiter);

// The slab: a slot of 4 numbers per key (the header's 3 and the bucket's 1), grown by doubling from 16.
let capacity = 16;
while (capacity < n) capacity *= 2;
const slabBytes = capacity * 4 * 8;

if (store.size !== n || map.size !== n || keep.length !== 5) throw new Error(`expected ${n} tracked keys, got ${store.size}`);
console.log(JSON.stringify({ keys: n, map: mapBytes / n, store: storeBytes / n, slab: slabBytes / n }));
