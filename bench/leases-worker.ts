/**
 * One instance of bench/leases.ts: a separate OS process with its own limiter (and leases),
 * deciding on one hot key through the local Upstash bridge at a given rate, logging every
 * decision with a shared monotonic timestamp (CLOCK_MONOTONIC through process.hrtime, the same
 * clock in every process of the machine) as it happens, so a killed process loses nothing it
 * logged. Not run by hand: bench/leases.ts bundles and starts it.
 */
import { createHash } from "node:crypto";
import { openSync, writeSync } from "node:fs";
import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis";
import { createRateLimiter, fixedWindow, memoryStore, type Policy, upstashStore } from "../packages/core/src/index.ts";

export interface WorkerConfig {
  url: string;
  token: string;
  /** "memory": exact on a memory store of its own, the floor of a synchronous decision in such a process. */
  mode: "leased" | "exact" | "memory" | "upstash-fixed" | "upstash-cached";
  /** "hot": fixed window 6,000/min; "multi": 10/s AND 1,000/day; "ten": fixed window 1,000 per 10 s. */
  policy: "hot" | "multi" | "ten";
  prefix: string;
  ratePerSec: number;
  /** Shared start (hrtime µs; sent once every process is ready) and run length. */
  startUs: number;
  durationMs: number;
  seed: number;
  role: "normal" | "adversary" | "slow-clock";
  leaseMs: number;
  out: string;
}

/** The policies of a scenario, as the parent's checker also builds them. */
export function policiesOf(name: WorkerConfig["policy"]): Policy[] {
  if (name === "multi") {
    return [fixedWindow({ limit: 10, window: "1s", name: "second" }), fixedWindow({ limit: 1000, window: "1d", name: "day" })];
  }
  if (name === "ten") return [fixedWindow({ limit: 1000, window: "10s" })];
  return [fixedWindow({ limit: 6000, window: "1m" })];
}

/**
 * @upstash/ratelimit 2.2 opens its scripts with `#!lua flags=allow-key-locking`, which only
 * Upstash's servers accept. This client runs them without the flag (which changes nothing they
 * compute), by the SHA1 of the text without it once EVAL has loaded it: one request per call,
 * as against Upstash.
 */
function acceptedByVanillaRedis(redis: Redis): Redis {
  const FLAG = /^#!lua flags=allow-key-locking\n/;
  const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");
  const loaded = new Map<string, string>();
  return new Proxy(redis, {
    get(target, property, receiver) {
      if (property === "eval") {
        return (script: string, keys: string[], args: unknown[]) => {
          const stripped = script.replace(FLAG, "");
          loaded.set(sha1(script), sha1(stripped));
          return target.eval(stripped, keys, args);
        };
      }
      if (property === "evalsha") {
        return (sha: string, keys: string[], args: unknown[]) => target.evalsha(loaded.get(sha) ?? sha, keys, args);
      }
      return Reflect.get(target, property, receiver);
    },
  });
}

const hrUs = (): number => Number(process.hrtime.bigint() / 1000n);

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

async function main(): Promise<void> {
  const c = JSON.parse(process.argv[2]!) as WorkerConfig;
  if (c.role === "slow-clock") {
    // This process's clocks run 0.1% slow (both the wall clock and the monotonic one); the log
    // keeps the true monotonic clock (hrtime), which is not patched.
    const wall = Date.now.bind(Date);
    const mono = performance.now.bind(performance);
    const w0 = wall();
    const m0 = mono();
    Date.now = () => w0 + (wall() - w0) * 0.999;
    performance.now = () => m0 + (mono() - m0) * 0.999;
  }
  const fd = openSync(c.out, "a");
  const redis = new Redis({ url: c.url, token: c.token, enableAutoPipelining: false, retry: { retries: 0 } });
  const policies = policiesOf(c.policy);
  /** A decision, and for one answered synchronously (from a lease, or the memory store) the limiter's own time, µs. */
  let decide: () => Promise<{ allowed: boolean; source: string; resets: number[]; syncUs?: number }>;
  let flush = async (): Promise<void> => {};
  if (c.mode === "leased" || c.mode === "exact" || c.mode === "memory") {
    const limiter = createRateLimiter({
      policy: policies,
      store: c.mode === "memory" ? memoryStore() : upstashStore({ redis }),
      prefix: c.prefix,
      mode: c.mode === "leased" ? "leased" : "exact",
      leaseMs: c.leaseMs,
      // A generous deadline: on a loaded machine, measure slow answers rather than count failures.
      resilience: { timeoutMs: 30_000, logger: false },
    });
    decide = async () => {
      // decide(): a decision served from a lease (or by the memory store) comes back
      // synchronously, so the time measured is the limiter's own, not a promise's turn.
      const t0 = hrUs();
      const answer = limiter.decide("hot");
      if (!(answer instanceof Promise)) {
        const syncUs = hrUs() - t0;
        return { allowed: answer.allowed, source: answer.source ?? "store", resets: answer.policies.map((p) => p.resetAt), syncUs };
      }
      const d = await answer;
      return { allowed: d.allowed, source: d.source ?? "store", resets: d.policies.map((p) => p.resetAt) };
    };
    flush = () => limiter.flush();
  } else {
    const p = policies[0]!;
    const window = `${p.windowMs} ms` as const;
    const ratelimit = new Ratelimit({
      redis: acceptedByVanillaRedis(redis),
      prefix: c.prefix,
      limiter: c.mode === "upstash-fixed" ? Ratelimit.fixedWindow(p.limit, window) : Ratelimit.cachedFixedWindow(p.limit, window),
      ephemeralCache: c.mode === "upstash-cached" ? new Map() : false,
      analytics: false,
      // Its default (5 s) admits every request whose store call is slower: measure the limiter, not that.
      timeout: 0,
    });
    decide = async () => {
      const r = await ratelimit.limit("hot");
      return { allowed: r.success, source: "store", resets: [r.reset] };
    };
  }
  const random = mulberry32(c.seed);
  const lines: string[] = [];
  const write = (line: string) => {
    lines.push(line);
    if (lines.length >= 1) writeSync(fd, lines.splice(0).join(""));
  };
  const one = async (): Promise<void> => {
    const t0 = hrUs();
    let d;
    try {
      d = await decide();
    } catch (error) {
      write(`${JSON.stringify(["e", t0, hrUs(), (error as Error).message.slice(0, 80)])}\n`);
      return;
    }
    const t1 = hrUs();
    write(`${JSON.stringify([d.allowed ? "a" : "d", t0, t1, d.source, d.resets, d.syncUs ?? -1])}\n`);
  };
  // Ready: the parent gives every process the same start once all are.
  c.startUs = await new Promise<number>((resolve) => {
    process.once("message", (m: { startUs: number }) => resolve(m.startUs));
    process.send!("ready");
  });
  // The parent asks for the exit flush once every instance has made its decisions, so that the
  // store requests of the run and those of the flushes are counted apart.
  const flushAsked = new Promise<void>((resolve) => process.once("message", () => resolve()));
  await sleep((c.startUs - hrUs()) / 1000);
  const end = c.startUs + c.durationMs * 1000;
  const inflight = new Set<Promise<void>>();
  let next = c.startUs;
  const windowUs = policies[0]!.windowMs * 1000;
  const wallMinusHr = Date.now() * 1000 - hrUs();
  while (hrUs() < end) {
    if (c.role === "adversary") {
      // Spends as fast as it can in the last 40 ms of every window (and 10 ms after its end):
      // every unit of every lease it holds at its deadline, then whatever the store gives.
      const wallUs = hrUs() + wallMinusHr;
      const intoWindow = wallUs % windowUs;
      if (intoWindow > windowUs - 40_000 || intoWindow < 10_000) {
        await one();
        await new Promise<void>((resolve) => setImmediate(resolve));
        continue;
      }
    }
    next += (-Math.log(1 - random()) / c.ratePerSec) * 1e6;
    const wait = (next - hrUs()) / 1000;
    if (wait > 0) await sleep(c.role === "adversary" ? Math.min(wait, 5) : wait);
    if (c.role === "adversary" && hrUs() < next) continue;
    // Open loop: arrivals keep their schedule however slow the store answers.
    const pending = one();
    inflight.add(pending);
    void pending.then(() => inflight.delete(pending));
  }
  await Promise.all(inflight);
  process.send!("decided");
  await flushAsked;
  try {
    await flush();
  } catch (error) {
    write(`${JSON.stringify(["e", hrUs(), hrUs(), `flush: ${(error as Error).message.slice(0, 80)}`])}\n`);
  }
  write(`${JSON.stringify(["done", hrUs()])}\n`);
  process.disconnect();
  process.exit(0);
}

if (process.argv[2]?.startsWith("{")) void main();
