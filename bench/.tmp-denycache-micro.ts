// Ad-hoc: client-side cost of a Redis store decision over a client that answers at once (no network).
import { createHook } from "node:async_hooks";
import { copies, loadCore } from "./copies.ts";

const cores = [];
for (const copy of copies()) cores.push({ name: copy.suffix || " (current)", core: await loadCore(copy) });
const REPLY_ADMIT = [1, 1, 99, 1700003600000, 0, 5];
const REPLY_DENY = [0, 0, 0, 1700003600000, 5000];
const make = (core: any, reply: number[], denyCache: boolean) => {
  const client = { evalsha: () => Promise.resolve(reply), eval: () => Promise.resolve(reply), del: () => Promise.resolve(1) };
  return core.createRateLimiter({
    policy: core.slidingWindow({ limit: 100, window: "1h" }),
    store: core.redisStore({ client, denyCache }),
    prefix: "m:",
  });
};
let promises = 0;
const hook = createHook({ init(_id, type) { if (type === "PROMISE") promises++; } });
const subjects = [];
for (const { name, core } of cores) {
  subjects.push({ name: `admit, cache on${name}`, l: make(core, REPLY_ADMIT, true) });
  subjects.push({ name: `admit, cache off${name}`, l: make(core, REPLY_ADMIT, false) });
  subjects.push({ name: `deny, answered by the cache (one key)${name}`, l: make(core, REPLY_DENY, true), one: true });
  subjects.push({ name: `deny (store answers; wait 5 s not cached: new key each)${name}`, l: make(core, REPLY_DENY, true), fresh: true });
}
const ids = Array.from({ length: 1000 }, (_, i) => `u${i}`);
// promises per decision
for (const s of subjects) {
  for (let i = 0; i < 2000; i++) await s.l.limit(s.fresh ? `w${i}` : s.one ? "k" : ids[i % 1000]);
  hook.enable(); promises = 0;
  const n = 1000;
  for (let i = 0; i < n; i++) await s.l.limit(s.fresh ? `x${i}` : s.one ? "k" : ids[i % 1000]);
  hook.disable();
  s.promises = promises / n;
}
const N = 50_000, ROUNDS = 7;
const times = new Map();
for (let r = 0; r < ROUNDS; r++) {
  for (const s of subjects) {
    const t = performance.now();
    for (let i = 0; i < N; i++) await s.l.limit(s.fresh ? `r${r}:${i}` : s.one ? "k" : ids[i % 1000]);
    const ns = ((performance.now() - t) / N) * 1e6;
    times.set(s.name, [...(times.get(s.name) ?? []), ns]);
  }
}
console.log("| subject | promises per decision | ns per decision (min of 7) | median |\n|---|---|---|---|");
for (const s of subjects) {
  const xs = times.get(s.name).slice().sort((a, b) => a - b);
  console.log(`| ${s.name} | ${s.promises.toFixed(2)} | ${Math.round(xs[0])} | ${Math.round(xs[3])} |`);
}
