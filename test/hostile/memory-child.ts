/**
 * Run by memory.test.ts as `node --expose-gc --import tsx test/hostile/memory-child.ts <maxKeys|default> <clients>`:
 * rotating IPv4 and IPv6 clients (each IPv6 one in its own /64) through the HTTP layer's decision
 * path into a memory store, one request each, with a real-looking clock. Prints one JSON line:
 * the largest store size seen (checked every 1,000 requests and at the end), heap figures
 * (heapUsed + arrayBuffers, after a full gc), and the wall and CPU time taken.
 */
import { memoryStore, slidingWindow } from "../../packages/core/src/index.ts";
import { createHttpRateLimiter, type RequestAccess } from "../../packages/core/src/http/index.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with node --expose-gc");

const [maxKeysArg = "default", clientsArg = "1000000"] = process.argv.slice(2);
const clients = Number(clientsArg);
const store = maxKeysArg === "default" ? memoryStore() : memoryStore({ maxKeys: Number(maxKeysArg) });

/** The request is its own peer address; no framework in between. */
const ACCESS: RequestAccess<string> = { method: () => "GET", path: () => "/api", header: () => undefined };
let now = 1_700_000_000_000;
const http = createHttpRateLimiter<string>(
  { store, policy: slidingWindow({ limit: 10, window: "1m" }), clock: () => now, warnings: false },
  ACCESS,
);

const heap = (): number => {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

/** Client i: even ones IPv4 from 1.0.0.0 upwards, odd ones IPv6 in /64s of their own (and a varying interface id). */
function peer(i: number): string {
  const n = i >>> 1;
  if ((i & 1) === 0) return `${1 + (n >>> 24)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
  return `2001:db8:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}:${(i & 0xffff).toString(16)}::1`;
}

const before = heap();
let maxSize = 0;
let denied = 0;
const started = performance.now();
const cpuStarted = process.cpuUsage();
for (let i = 0; i < clients; i++) {
  // 1 ms per 10 requests: 100 s of traffic for a million, so nothing expires in the window.
  if (i % 10 === 0) now++;
  const p = peer(i);
  const result = await http.decideRequest(p, p);
  if (!result!.allowed) denied++;
  if (i % 1000 === 0 && store.size > maxSize) maxSize = store.size;
}
if (store.size > maxSize) maxSize = store.size;
const elapsedMs = performance.now() - started;
const cpuUs = process.cpuUsage(cpuStarted);
const after = heap();
const size = store.size;

console.log(
  JSON.stringify({
    maxKeys: maxKeysArg,
    clients,
    maxSize,
    size,
    denied,
    heapBefore: before,
    heapAfter: after,
    bytesPerIdentifier: (after - before) / size,
    elapsedMs,
    cpuUsPerRequest: (cpuUs.user + cpuUs.system) / clients,
  }),
);
// Keeps the store reachable until after the last measurement.
if (store.size < 0) console.log(http);
