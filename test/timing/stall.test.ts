/**
 * The timing claims of a store stall, measured alone (`npx vitest run --config vitest.timing.config.ts`;
 * `npm test` runs it as its own stage, after the other suites, so that nothing else loads the
 * machine): redis-server SIGSTOPped for 5 s under 200 concurrent clients, one integration at a
 * time (Express 5, Hono on @hono/node-server, Koa, withRateLimit behind node:http), each over
 * ioredis and over the Upstash store (the local bridge in its own process), with the default
 * `onStoreError` ("fallback") and the default resilience (`timeoutMs` 1,000 ms).
 *
 * Every part is its own process: redis-server, the bridge, the app process (test/faults/fault-apps.ts:
 * the integration's two apps and a trivial handler, the latency floor) and the 200 clients
 * (test/faults/client-process.ts). Asserted strictly, per store:
 *
 * - server side, from a request's arrival in the app process to its decision, p99 over the
 *   requests that arrived during the stall ≤ `timeoutMs` + 10 ms;
 * - client side, p99 over the same requests ≤ that + the trivial handler's p99 the clients saw
 *   (what any request cost on this machine at that moment): over the requests that overlapped the
 *   answers at the deadline, which come out together about timeoutMs into the stall, or over the
 *   whole stall when that is more;
 * - every app decided by the store again ≤ 2 s after SIGCONT; and after a 12 s stall too, for the
 *   four integrations at once (a cool-down that grew during the outage would be paid here).
 *
 * Those latency bounds are asserted by `npm run test:timing` (FLOODGATE_TIMING_BOUNDS=1), the
 * figures docs/reliability.md records. `npm test` runs the same stalls and asserts what must hold
 * on any machine: every request answered, none 5xx, the app alive, the deadline reached, and every
 * app decided by the store again before the run ends; the latencies are printed, not asserted.
 *
 * The event loop's lag in the app process is recorded (not subtracted). Figures go to stdout as
 * `[timing] {...}` lines (docs/reliability.md quotes them).
 *
 * A machine that other work oversubscribes can starve any process for longer than the 10 ms
 * slack, whatever the code does. That is measured, not assumed: this test process sleeps through
 * the stall, with a timer every 5 ms whose lateness is the witness (nothing else runs in it, so
 * only the machine can make it late). An attempt that misses a claim while the witness was late by
 * more than 10 ms in the stall is measured again, up to 3 attempts in all, each printed; a claim
 * missed while the witness was on time fails at once. The claims are asserted strictly on the
 * attempt that counts.
 */
import { loadavg } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { ADAPTERS } from "../hostile/support.ts";
import { clearOfHourBoundary, uniquePrefix } from "../stores/store-contract.ts";
import { STORES } from "../faults/shared.ts";
import { nowMs, quantile, type Rig, round, sleep, startRig } from "../faults/support.ts";

/** The default deadline: the claim is measured at the value users get. */
const TIMEOUT_MS = 1000;
const SLACK_MS = 10;
const RECOVERY_BOUND_MS = 2000;
const CLIENTS = 200;
const FLOOR_CLIENTS = 8;
/** The clients of the trivial handler probe more often: the floor is measured where the deadline's answers go out. */
const FLOOR_THINK_MS = 50;
/**
 * Each client waits a random 0.5 to 1.5 × this between its requests (and starts at random), as
 * independent clients do: 200 of them keep the 2-core machine below saturation.
 */
const THINK_MS = 250;
const STALL_MS = 5000;
const LONG_STALL_MS = 12_000;
const AFTER_MS = 3000;
/** Attempts of one measurement when the machine starved the idle witness (see above). */
const ATTEMPTS = 3;
const WITNESS_EVERY_MS = 5;
/** Whether the latency bounds are asserted (`npm run test:timing`) or only recorded (`npm test`). */
const BOUNDS = process.env["FLOODGATE_TIMING_BOUNDS"] === "1";

type Store = (typeof STORES)[number];

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** The lateness of a timer in this (idle) process: [nowMs(), ms late] pairs, flat, until `stop()`. */
function witness(): { samples: number[]; stop(): void } {
  const samples: number[] = [];
  let expected = performance.now() + WITNESS_EVERY_MS;
  const timer = setInterval(() => {
    const now = performance.now();
    samples.push(nowMs(), Math.max(0, now - expected));
    expected = now + WITNESS_EVERY_MS;
  }, WITNESS_EVERY_MS);
  return { samples, stop: () => clearInterval(timer) };
}

interface StoreFigures {
  requests: number;
  server: { p50: number; p99: number; max: number; bound: number };
  client: {
    p50: number;
    p99: number;
    max: number;
    /** The larger of the two below: what the bound adds. */
    floorP99: number;
    /** The trivial handler's p99 over the stall, and over the requests that overlapped the answers at the deadline (how many). */
    floorStallP99: number;
    floorThenP99: number;
    floorThen: number;
    bound: number;
  };
  recoveryMs: number;
}

interface Measured {
  stores: Record<Store, StoreFigures>;
  /** The idle witness's lateness in the stall: what the machine alone delayed a timer by. */
  witness: { p99: number; max: number };
}

/** A stall of `stallMs` under 200 clients on `adapters` (fallback policy); the figures per store. */
async function stall(label: string, adapters: string[], stallMs: number): Promise<Measured> {
  await rig?.close();
  rig = undefined;
  await clearOfHourBoundary(60_000);
  const load1 = loadavg()[0]!;
  const r = rig = await startRig([], TIMEOUT_MS, uniquePrefix(), { adapters, policies: ["fallback"], clientProcess: true, jitter: true });
  const perApp = Math.floor((CLIENTS - FLOOR_CLIENTS) / r.apps.length);
  const load = r.load(perApp, CLIENTS - perApp * r.apps.length, THINK_MS, FLOOR_THINK_MS);
  await sleep(1500); // connected, scripts loaded, breakers closed
  const healthyBy = nowMs() + 10_000;
  for (;;) {
    const before = await r.stats();
    if (STORES.every((s) => !before.stores[s]!.failing)) break;
    expect(nowMs(), `${label}: both stores answering before the stall`).toBeLessThan(healthyBy);
    await sleep(100);
  }
  await sleep(500);
  const idle = witness();
  const fromMs = nowMs();
  r.redis.kill("SIGSTOP");
  await sleep(stallMs);
  r.redis.kill("SIGCONT");
  const backAtMs = nowMs();
  idle.stop();
  const late: number[] = [];
  for (let i = 0; i < idle.samples.length; i += 2) {
    if (idle.samples[i]! >= fromMs && idle.samples[i]! < backAtMs) late.push(idle.samples[i + 1]!);
  }
  const witnessed = { p99: round(quantile(late, 0.99)), max: round(Math.max(...late)) };
  await sleep(AFTER_MS);
  await load.stop();
  const stats = await r.stats(true);

  const inStall = (atMs: number): boolean => atMs >= fromMs && atMs < backAtMs;
  const samples = r.samples.filter((s) => s.startMs >= fromMs - 1000);
  const floorSamples = samples.filter((s) => s.app === -1 && inStall(s.startMs));
  const floor = floorSamples.map((s) => s.ms);
  const lag: number[] = [];
  const lagBefore: number[] = [];
  for (let i = 0; i < stats.lag!.length; i += 2) {
    if (inStall(stats.lag![i]!)) lag.push(stats.lag![i + 1]!);
    else if (stats.lag![i]! >= fromMs - 1000 && stats.lag![i]! < fromMs) lagBefore.push(stats.lag![i + 1]!);
  }
  const out = {} as Record<Store, StoreFigures>;
  for (const store of STORES) {
    const apps = r.apps.map((a, i) => ({ ...a, i })).filter((a) => a.store === store);
    const mine = samples.filter((s) => apps.some((a) => a.i === s.app) && inStall(s.startMs));
    const client = mine.map((s) => s.ms);
    // The answers at the deadline of the requests in flight when Redis froze come out together,
    // about timeoutMs after it: the floor is the trivial handler's p99 over the requests that
    // overlapped them (what any request cost on the machine at that moment), and over the stall
    // when that is more.
    const atDeadline = mine.filter((s) => s.startMs < fromMs + TIMEOUT_MS && s.ms >= TIMEOUT_MS - 1).map((s) => s.startMs + s.ms);
    const [answersFrom, answersTo] = [Math.min(...atDeadline), Math.max(...atDeadline)];
    const floorThen = floorSamples.filter((s) => s.startMs <= answersTo && s.startMs + s.ms >= answersFrom).map((s) => s.ms);
    const floorP99 = Math.max(quantile(floor, 0.99), floorThen.length > 0 ? quantile(floorThen, 0.99) : 0);
    const server: number[] = [];
    const firsts: number[] = [];
    for (const app of apps) {
      const t = stats.decisionTimes![app.name]!;
      let first = Number.POSITIVE_INFINITY;
      for (let i = 0; i < t.length; i += 3) {
        if (inStall(t[i]!)) server.push(t[i + 1]!);
        if (t[i + 2] === 1 && t[i]! + t[i + 1]! >= backAtMs) first = Math.min(first, t[i]! + t[i + 1]!);
      }
      firsts.push(first);
    }
    const serverBound = TIMEOUT_MS + SLACK_MS;
    out[store] = {
      requests: server.length,
      server: {
        p50: round(quantile(server, 0.5)),
        p99: round(quantile(server, 0.99)),
        max: round(Math.max(...server)),
        bound: serverBound,
      },
      client: {
        p50: round(quantile(client, 0.5)),
        p99: round(quantile(client, 0.99)),
        max: round(Math.max(...client)),
        floorP99: round(floorP99),
        floorStallP99: round(quantile(floor, 0.99)),
        floorThenP99: round(quantile(floorThen, 0.99)),
        floorThen: floorThen.length,
        bound: round(serverBound + floorP99),
      },
      recoveryMs: Math.round(Math.max(...firsts) - backAtMs),
    };
  }
  const unanswered = samples.filter((s) => s.status === 0).length;
  const fiveXx = samples.filter((s) => s.status >= 500).length;
  const figures = {
    run: label,
    stallMs,
    clients: CLIENTS,
    thinkMs: THINK_MS,
    requests: samples.length,
    unanswered,
    status5xx: fiveXx,
    lag: { beforeP99: round(quantile(lagBefore, 0.99)), stallP99: round(quantile(lag, 0.99)), stallMax: round(Math.max(...lag)) },
    witness: witnessed,
    loadavg1: [round(load1), round(loadavg()[0]!)],
    ...out,
    stores: Object.fromEntries(STORES.map((s) => {
      const { calls, failures, timeouts, rejected, lateCharges, lateRefunds } = stats.stores[s]!;
      return [s, { calls, failures, timeouts, rejected, lateCharges, lateRefunds }];
    })),
  };
  console.log(`[timing] ${JSON.stringify(figures)}`);

  expect(r.child.exitCode, "the app process is alive").toBeNull();
  expect(stats.uncaughtExceptions).toEqual([]);
  expect(stats.unhandledRejections).toEqual([]);
  expect(unanswered, "requests without an answer").toBe(0);
  expect(fiveXx, "5xx answers").toBe(0);
  // The floor is what the clients' bound adds: needed only where the bounds are asserted.
  if (BOUNDS) expect(floor.length, "requests to the trivial handler during the stall").toBeGreaterThan(50);
  for (const store of STORES) {
    expect(stats.stores[store]!.timeouts, `${store}: calls abandoned at their deadline during the stall`).toBeGreaterThan(0);
  }
  return { stores: out, witness: witnessed };
}

/** The claims `check` makes of one attempt's figures, as [what, holds] pairs. */
type Claims = (f: StoreFigures, store: Store) => Array<[string, boolean]>;

/**
 * Measures until every claim holds, or a claim is missed while the witness was on time, or
 * ATTEMPTS are spent; then asserts every claim of the attempt that counts.
 */
async function measured(label: string, adapters: string[], stallMs: number, claims: Claims): Promise<void> {
  for (let attempt = 1;; attempt++) {
    const m = await stall(attempt === 1 ? label : `${label} (attempt ${attempt})`, adapters, stallMs);
    const missed = STORES.flatMap((s) => claims(m.stores[s], s).filter(([, holds]) => !holds).map(([what]) => what));
    const starved = m.witness.max > SLACK_MS;
    if (missed.length > 0 && starved && attempt < ATTEMPTS) {
      console.warn(
        `[timing] ${label}: attempt ${attempt} missed ${
          missed.join("; ")
        } while the machine starved an idle timer by ${m.witness.max} ms (over the ${SLACK_MS} ms slack): measuring again`,
      );
      continue;
    }
    for (const store of STORES) {
      for (const [what, holds] of claims(m.stores[store], store)) {
        expect(holds, `${what} (figures: ${JSON.stringify(m.stores[store])}; idle witness late by ${m.witness.max} ms at most)`).toBe(true);
      }
    }
    return;
  }
}

const recovered: Claims = (f, store) =>
  BOUNDS
    ? [[`${store}: every app decided by the store again ≤ 2 s after SIGCONT`, f.recoveryMs <= RECOVERY_BOUND_MS]]
    : [[`${store}: every app decided by the store again after SIGCONT`, Number.isFinite(f.recoveryMs)]];

describe(`a ${STALL_MS / 1000} s redis-server stall under ${CLIENTS} concurrent clients, one integration at a time`, () => {
  it.each(ADAPTERS.map((a) => a.name))(
    "%s: decision p99 ≤ timeoutMs + 10 ms, clients' p99 ≤ that + the floor, back on the store ≤ 2 s",
    async (adapter) => {
      await measured(adapter, [adapter], STALL_MS, (f, store) => [
        ...(BOUNDS
          ? ([
            [`${store}: more than 500 requests arrived during the stall`, f.requests > 500],
            [`${store}: p99 from arrival to decision ≤ timeoutMs + ${SLACK_MS} ms`, f.server.p99 <= f.server.bound],
            [`${store}: the clients' p99 ≤ timeoutMs + ${SLACK_MS} ms + the trivial handler's p99`, f.client.p99 <= f.client.bound],
          ] as Array<[string, boolean]>)
          : []),
        ...recovered(f, store),
      ]);
    },
    ATTEMPTS * 40_000,
  );
});

describe(`a ${LONG_STALL_MS / 1000} s stall, every integration at once`, () => {
  it("every app decided by the store again ≤ 2 s after SIGCONT, however long the outage", async () => {
    await measured("all, long", ADAPTERS.map((a) => a.name), LONG_STALL_MS, recovered);
  }, ATTEMPTS * 50_000);
});
