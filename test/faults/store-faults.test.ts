/**
 * Store faults under load, with real processes: redis-server SIGKILLed and restarted (persistence
 * off, and on with appendfsync always), SIGSTOPped for 5 s, and the Upstash bridge answering
 * 500s, garbage and slow replies (through the fault proxy, a real HTTP hop), while 200 closed-loop
 * clients hit Express 5, Hono on @hono/node-server, Koa and withRateLimit (node:http), each over
 * ioredis and over the Upstash store, each with every onStoreError policy: 24 apps side by side
 * in one app process, plus a trivial handler in the same process whose latency is the floor.
 *
 * Asserted for every fault: every request answered, no 5xx, no crash, no unhandled rejection or
 * uncaught exception; calls in flight ≤ maxInFlight; every late charge settled (given back, or
 * counted as failed); per app, the units Redis holds ≤ the admissions the store answered plus the
 * charges no client can know (counted: consumes in flight at a kill, failed late refunds, replies
 * lost after the command ran), and exactly those admissions when the state survives and there
 * are none. Asserted when the machine is quiet enough to measure them (event-loop lag p99 ≤
 * 100 ms before the fault; else said on stderr): during a stall or slow replies, the p99 from a
 * request's arrival to its decision ≤ timeoutMs + 10 ms + the lag's p99 over the same window;
 * every app decided by the store again ≤ 2 s (+ the lag's p99) after the store returns. The
 * clients' p99 is recorded (they share the test process with the rest of the run); the timing
 * stage, test/timing/, asserts it with its clients in a process of their own.
 *
 * Figures go to stdout as `[faults] {...}` lines (docs/reliability.md quotes them).
 */
import { afterEach, describe, expect, it } from "vitest";
import { clearOfHourBoundary, uniquePrefix } from "../stores/store-contract.ts";
import type { Fault } from "../support/fault-proxy.ts";
import { POLICIES, STORES } from "./shared.ts";
import { LONG, nowMs, quantile, type Rig, round, type Sample, sleep, startRig } from "./support.ts";

/** The default deadline: the claim is measured at the value users get. */
const TIMEOUT_MS = 1000;
const MAX_IN_FLIGHT = 1000;
/** 24 apps × 8 clients and 8 on the floor handler: 200 concurrent clients (LONG: 24 × 25 + 8). */
const PER_APP = LONG ? 25 : 8;
const FLOOR_CLIENTS = 8;
/** Each client waits this long between its requests (LONG: none, as fast as the apps answer). */
const THINK_MS = LONG ? 0 : 100;
const STALL_MS = LONG ? 10_000 : 5000;
/**
 * How long redis-server stays dead between SIGKILL and its restart (the breaker probes once a
 * second however long; recovery after a 12 s outage is test/timing/stall.test.ts's).
 */
const DOWN_MS = LONG ? 1500 : 500;
const BRIDGE_FAULT_MS = LONG ? 2500 : 1500;
const RECOVERY_BOUND_MS = 2000;
/** The most event-loop lag (p99, in the second before the fault) at which timing is measured. */
const MAX_FLOOR_LAG_MS = 100;
const AFTER_MS = 4000;

type Store = (typeof STORES)[number];
type Window = { fromMs: number; toMs: number };

interface Injected {
  /** When the fault ended: the store answers again from here. */
  backAtMs: number;
  /** Stores the fault hit. */
  hit: Store[];
  /** Windows whose requests must meet the latency bound. */
  timed: Record<string, Window & { stores: Store[] }>;
  /** The state in Redis survives the fault (so Redis holds exactly the store's admissions). */
  stateKept: boolean;
  /**
   * From the SIGKILL to its exit seen: the consumes sent before the process was gone and not
   * answered before the signal have an outcome no one knows.
   */
  killed?: Window;
}

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

async function scenario(name: string, redisArgs: string[], inject: (rig: Rig) => Promise<Injected>): Promise<void> {
  // Hour windows: the whole run inside one.
  await clearOfHourBoundary(60_000);
  const r = rig = await startRig(redisArgs, TIMEOUT_MS, uniquePrefix());
  const load = r.load(PER_APP, FLOOR_CLIENTS, THINK_MS);
  await sleep(1500); // connected, scripts loaded, breakers closed
  // Both stores answering before the fault (on a busy machine a slow call may time out at first).
  const healthyBy = nowMs() + 10_000;
  for (;;) {
    const before = await r.stats();
    if (STORES.every((s) => !before.stores[s]!.failing)) break;
    expect(nowMs(), `${name}: both stores answering before the fault`).toBeLessThan(healthyBy);
    await sleep(100);
  }
  const startedAt = nowMs();
  const injected = await inject(r);
  await sleep(AFTER_MS);
  await load.stop();
  const settled = await r.ask<{ settled: boolean }>({ type: "settle", timeoutMs: 10_000 }, "settled");
  const stats = await r.stats(true);

  const samples = r.samples.filter((s) => s.startMs >= startedAt);
  const storeOf = (s: Sample): Store | undefined => (s.app === -1 ? undefined : r.apps[s.app]!.store);
  const figures: Record<string, unknown> = { scenario: name, requests: samples.length };

  // Every request answered; no 5xx; 429 only where the store-error policy is "deny" (the store never denies).
  const unanswered = samples.filter((s) => s.status === 0).length;
  const fiveXx = samples.filter((s) => s.status >= 500).length;
  const badStatus = samples.filter((s) => s.app !== -1 && !(s.status === 200 || (s.status === 429 && r.apps[s.app]!.policy === "deny")));
  figures.unanswered = unanswered;
  figures.status5xx = fiveXx;

  // Latency during the timed windows. Client side: as the clients saw it, against the trivial
  // handler's p99 over the same window. Server side: from the request's arrival in the app
  // process to its decision. Both may exceed the deadline by what the event loop lagged (a timer
  // fires late by that much), measured over the same window.
  type Figures = { p50: number; p99: number; max: number; bound: number; floorP99?: number; lagP99?: number };
  const timed: Record<string, { requests: number; decisions: number; client: Figures; server: Figures }> = {};
  const lagPairs = stats.lag!;
  for (const [label, w] of Object.entries(injected.timed)) {
    const inWindow = (atMs: number): boolean => atMs >= w.fromMs && atMs < w.toMs;
    const limited = samples.filter((s) => inWindow(s.startMs) && w.stores.includes(storeOf(s)!)).map((s) => s.ms);
    const floor = samples.filter((s) => inWindow(s.startMs) && s.app === -1).map((s) => s.ms);
    const lagMs: number[] = [];
    for (let i = 0; i < lagPairs.length; i += 2) if (inWindow(lagPairs[i]!)) lagMs.push(lagPairs[i + 1]!);
    const decisions: number[] = [];
    for (const app of r.apps.filter((a) => w.stores.includes(a.store))) {
      const pairs = stats.decisionTimes![app.name]!;
      for (let i = 0; i < pairs.length; i += 3) if (inWindow(pairs[i]!)) decisions.push(pairs[i + 1]!);
    }
    const lagP99 = quantile(lagMs, 0.99);
    timed[label] = {
      requests: limited.length,
      decisions: decisions.length,
      client: {
        p50: round(quantile(limited, 0.5)),
        p99: round(quantile(limited, 0.99)),
        max: round(Math.max(...limited)),
        floorP99: round(quantile(floor, 0.99)),
        bound: round(TIMEOUT_MS + 10 + quantile(floor, 0.99) + lagP99),
      },
      server: {
        p50: round(quantile(decisions, 0.5)),
        p99: round(quantile(decisions, 0.99)),
        max: round(Math.max(...decisions)),
        lagP99: round(lagP99),
        bound: round(TIMEOUT_MS + 10 + lagP99),
      },
    };
  }
  figures.timed = timed;
  // The timing claims are measured only when the machine lets them be: with the event loop of the
  // app process already late by more than MAX_FLOOR_LAG_MS before the fault (other work on the
  // machine), a 1 s deadline and a 2 s recovery are noise on top of the machine's own delays.
  const lagBefore: number[] = [];
  for (let i = 0; i < lagPairs.length; i += 2) {
    if (lagPairs[i]! >= startedAt - 1500 && lagPairs[i]! < startedAt) lagBefore.push(lagPairs[i + 1]!);
  }
  const lagBeforeP99 = round(quantile(lagBefore, 0.99));
  const timingMeasured = lagBeforeP99 <= MAX_FLOOR_LAG_MS;
  figures.lagBeforeP99 = lagBeforeP99;
  figures.timingMeasured = timingMeasured;
  if (!timingMeasured) {
    console.warn(
      `[faults] ${name}: timing claims NOT measured: the app process's event loop lagged ${lagBeforeP99} ms (p99) before the fault, over the ${MAX_FLOOR_LAG_MS} ms this suite needs; the machine is busy with other work. Correctness claims are still asserted.`,
    );
  }

  // Back on the store: when every app on it had a decision from the store again, after the
  // fault ended; and the last decision not from the store (a later slow call under load may
  // time out again: reported, not claimed).
  const recovery: Record<string, number> = {};
  const lastNotStore: Record<string, number> = {};
  for (const store of injected.hit) {
    const apps = r.apps.filter((a) => a.store === store);
    const firsts = apps.map((a) => {
      const t = stats.decisionTimes![a.name]!;
      for (let i = 0; i < t.length; i += 3) if (t[i + 2] === 1 && t[i]! + t[i + 1]! >= injected.backAtMs) return t[i]! + t[i + 1]!;
      return Number.POSITIVE_INFINITY;
    });
    recovery[store] = Math.round(Math.max(...firsts) - injected.backAtMs);
    lastNotStore[store] = Math.round(Math.max(...apps.map((a) => stats.apps[a.name]!.lastNotStoreAt)) - injected.backAtMs);
  }
  // A probe is a timer: it fires late by the event loop's lag, measured after the fault.
  const lagAfter: number[] = [];
  for (let i = 0; i < lagPairs.length; i += 2) if (lagPairs[i]! >= injected.backAtMs) lagAfter.push(lagPairs[i + 1]!);
  const recoveryBound = round(RECOVERY_BOUND_MS + quantile(lagAfter, 0.99));
  figures.recoveryMs = recovery;
  figures.recoveryBoundMs = recoveryBound;
  figures.lastNotStoreMs = lastNotStore;

  // What Redis holds, against the admissions the store answered, per store. The charges that no
  // decision can account for are counted: consumes in flight when redis-server was killed (their
  // replies lost; they may have run, and a client may re-send them), late refunds that failed,
  // and replies the proxy swallowed after the command ran.
  const proxy = await r.proxyCounts();
  const accounting: Record<
    string,
    { held: number; storeAdmissions: number; unknownAtKill: number; lateRefundsFailed: number; lostAfterRun: number }
  > = {};
  for (const store of STORES) {
    const apps = r.apps.filter((a) => a.store === store);
    let unknownAtKill = 0;
    const times = stats.consumeTimes![store]!;
    const killed = injected.killed;
    if (killed !== undefined) {
      for (let i = 0; i < times.length; i += 2) {
        if (times[i]! <= killed.toMs && times[i + 1]! >= Math.floor(killed.fromMs)) unknownAtKill++;
      }
    }
    accounting[store] = {
      held: apps.reduce((n, a) => n + stats.apps[a.name]!.held!, 0),
      storeAdmissions: apps.reduce((n, a) => n + stats.apps[a.name]!.storeAdmissions, 0),
      unknownAtKill,
      lateRefundsFailed: stats.stores[store]!.lateRefundsFailed,
      lostAfterRun: store === "upstash" ? proxy.lostAfterRun : 0,
    };
  }
  figures.accounting = accounting;
  figures.bySource = Object.fromEntries(
    POLICIES.map((p) => [
      p,
      r.apps.filter((a) => a.policy === p).reduce((acc, a) => {
        for (const [k, v] of Object.entries(stats.apps[a.name]!.bySource)) acc[k] = (acc[k] ?? 0) + v;
        return acc;
      }, {} as Record<string, number>),
    ]),
  );
  figures.stores = Object.fromEntries(STORES.map((s) => {
    const { calls, failures, timeouts, rejected, lateCharges, lateRefunds, lateRefundsFailed, maxInFlight } = stats.stores[s]!;
    return [s, { calls, failures, timeouts, rejected, lateCharges, lateRefunds, lateRefundsFailed, maxInFlight }];
  }));
  figures.proxy = proxy;
  figures.logged = stats.logged.map((l) =>
    `${Math.round(Number(l.slice(0, l.indexOf(" "))) - injected.backAtMs)} ${l.slice(l.indexOf(" ") + 1, l.indexOf(" ") + 120)}`
  );
  console.log(`[faults] ${JSON.stringify(figures)}`);

  expect(r.child.exitCode, "the app process is alive").toBeNull();
  expect(stats.uncaughtExceptions).toEqual([]);
  expect(stats.unhandledRejections).toEqual([]);
  expect(unanswered, "requests without an answer").toBe(0);
  expect(fiveXx, "5xx answers").toBe(0);
  expect(badStatus.slice(0, 3), "answers other than 200 (or 429 from a deny policy)").toEqual([]);
  for (const app of r.apps) expect(stats.apps[app.name]!.errors, `${app.name}: errors in the app's error handler`).toBe(0);
  // Latency bounds: asserted by `npm run test:timing` (FLOODGATE_TIMING_BOUNDS=1); in `npm test`
  // recorded above, and only the behaviour asserted (back on the store before the run ends).
  const bounds = timingMeasured && process.env["FLOODGATE_TIMING_BOUNDS"] === "1";
  for (const [label, t] of Object.entries(timed)) {
    if (!bounds) continue;
    expect(t.requests, `${label}: requests started during the fault`).toBeGreaterThan(100);
    expect(t.server.p99, `${label}: decision p99 ≤ timeoutMs + 10 ms + the event loop's p99 lag`).toBeLessThanOrEqual(t.server.bound);
    // The clients' p99 is recorded, not asserted: here they share the test process with the rest
    // of the run; test/timing/ asserts it with the clients in a process of their own.
  }
  for (const [store, ms] of Object.entries(bounds ? recovery : {})) {
    expect(ms, `${store}: every app decided by the store again within 2 s (+ the loop's lag) of its return`).toBeLessThanOrEqual(
      recoveryBound,
    );
  }
  // Without the bound, where the machine lets it be seen: a starved app process may see no
  // store decision within the window at all.
  for (const [store, ms] of Object.entries(timingMeasured ? recovery : {})) {
    expect(Number.isFinite(ms), `${store}: every app decided by the store again after its return`).toBe(true);
  }
  for (const store of STORES) {
    const s = stats.stores[store]!;
    expect(s.maxInFlight, `${store}: calls in flight`).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    expect(s.lateRefunds + s.lateRefundsFailed, `${store}: every late charge settled`).toBe(s.lateCharges);
  }
  expect(settled.settled, "abandoned calls settled and late charges given back").toBe(true);
  // No charge in Redis that no decision accounts for, beyond those counted above.
  for (const store of STORES) {
    const a = accounting[store]!;
    const unaccountable = a.unknownAtKill + a.lateRefundsFailed + a.lostAfterRun;
    for (const app of r.apps.filter((x) => x.store === store)) {
      const { held, storeAdmissions } = stats.apps[app.name]!;
      expect(held!, `${app.name}: units held in Redis ≤ store admissions (+ ${unaccountable} counted)`).toBeLessThanOrEqual(
        storeAdmissions + unaccountable,
      );
      if (injected.stateKept && unaccountable === 0) {
        expect(held, `${app.name}: state kept: exactly the store admissions`).toBe(storeAdmissions);
      }
    }
    expect(a.held, `${store}: units held ≤ store admissions + the counted unknowns`).toBeLessThanOrEqual(a.storeAdmissions + unaccountable);
  }
  // Every fault was seen: the store failed, and each Upstash fault answered requests. On a machine
  // too busy to send requests during a 1.5 s window, that is said, not asserted. A short kill may
  // fail nothing on ioredis (its offline queue holds the calls until redis-server is back, within
  // the deadline): there, requests must have arrived while it was down.
  for (const store of injected.hit) {
    const killed = injected.killed;
    if (killed === undefined || stats.stores[store]!.failures > 0) {
      expect(stats.stores[store]!.failures, `${store} failed during the fault`).toBeGreaterThan(0);
      continue;
    }
    let during = 0;
    for (const app of r.apps.filter((a) => a.store === store)) {
      const t = stats.decisionTimes![app.name]!;
      for (let i = 0; i < t.length; i += 3) if (t[i]! >= killed.fromMs && t[i]! <= injected.backAtMs) during++;
    }
    expect(during, `${store}: requests arrived while redis-server was down`).toBeGreaterThan(0);
  }
  if (name === "bridge faults") {
    const exercised = { "500": proxy.failed, garbage: proxy.garbage, slow: proxy.delayed, "500 after the command ran": proxy.lostAfterRun };
    for (const [fault, n] of Object.entries(exercised)) {
      if (timingMeasured) expect(n, `the proxy answered requests with "${fault}"`).toBeGreaterThan(0);
      else if (n === 0) console.warn(`[faults] ${name}: no request met the "${fault}" fault on this busy machine`);
    }
  }
}

const KILL_TIMEOUT = 120_000;

describe("store faults under load: 4 integrations × 2 stores × 3 onStoreError policies", () => {
  it(`redis-server SIGSTOPped for ${STALL_MS / 1000} s`, async () => {
    await scenario("stall", [], async (r) => {
      const fromMs = nowMs();
      r.redis.kill("SIGSTOP");
      await sleep(STALL_MS);
      r.redis.kill("SIGCONT");
      const backAtMs = nowMs();
      return {
        backAtMs,
        hit: ["ioredis", "upstash"],
        timed: { stall: { fromMs, toMs: backAtMs, stores: ["ioredis", "upstash"] } },
        stateKept: true,
      };
    });
  }, KILL_TIMEOUT);

  it.each([
    ["off", [] as string[]],
    ["on (appendonly, appendfsync always)", ["--appendonly", "yes", "--appendfsync", "always"]],
  ])(`redis-server SIGKILLed, restarted after ${DOWN_MS} ms, persistence %s`, async (what, args) => {
    await scenario(`kill, persistence ${what}`, args, async (r) => {
      const fromMs = nowMs();
      r.redis.kill("SIGKILL");
      await r.redis.exited();
      const killed = { fromMs, toMs: nowMs() };
      await sleep(DOWN_MS);
      await r.redis.restart();
      return { backAtMs: nowMs(), hit: ["ioredis", "upstash"], timed: {}, stateKept: false, killed };
    });
  }, KILL_TIMEOUT);

  it("the Upstash bridge answers 500s, garbage and slow replies (fault proxy)", async () => {
    await scenario("bridge faults", [], async (r) => {
      const timed: Injected["timed"] = {};
      const phase = async (label: string, fault: Fault): Promise<void> => {
        const fromMs = nowMs();
        await r.fault(fault);
        await sleep(BRIDGE_FAULT_MS);
        await r.fault({ kind: "none" });
        timed[label] = { fromMs, toMs: nowMs(), stores: ["upstash"] };
        await sleep(RECOVERY_BOUND_MS + 500);
      };
      await phase("500", { kind: "500" });
      await phase("garbage", { kind: "garbage" });
      await phase("slow", { kind: "slow", delayMs: TIMEOUT_MS + 500 });
      await phase("500 after the command ran", { kind: "500-after-run" });
      // Every phase is timed: a failing reply is answered at once, a slow one at the deadline.
      return { backAtMs: timed["500 after the command ran"]!.toMs, hit: ["upstash"], timed, stateKept: true };
    });
  }, KILL_TIMEOUT);
});
