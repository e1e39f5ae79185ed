/**
 * Core decision benchmark: Floodgate's four algorithms on the memory store, beside the peers, in
 * one run. Run: `npm run bench` (node --expose-gc --import tsx bench/core.ts).
 *
 * Every peer row and every Floodgate `limit()` row is one awaited call (mitata awaits each
 * iteration's promise): the promise and microtask overhead an async API costs. Floodgate's
 * `decide()` rows are the same decisions answered synchronously (the memory store is synchronous,
 * so no promise is needed): the path Floodgate's HTTP middleware takes.
 *
 * Scenarios (the same for every subject):
 *  - hot key: one key, always admitted. Floodgate: limit 100 per 1 s (token bucket capacity 100,
 *    refill 100/s) with an injected clock that advances 20 ms per call (50 req/s, half the limit),
 *    so windows roll every 50 calls, the sliding log holds about 50 timestamps, every call admits.
 *  - hot key, Date.now: the same key with the default clock (Date.now, which the peers read too)
 *    and a limit of 1e9 per 1000 s (token bucket: capacity 1e9, refill 1e6/s) so every call admits. The
 *    sliding log is left out (it would log millions of timestamps per second).
 *  - 100k keys: 100,000 distinct keys requested in a cycle, all tracked before measuring (steady
 *    state). Same policies; the clock advances 1 µs per call, so each key is seen every 100 ms of
 *    simulated time (10 req/s, admitted) and windows roll every 1,000,000 calls. The store is the
 *    default `memoryStore()` (maxKeys 100,000): the working set equals the bound (a hit only
 *    marks its key as used: the second-chance eviction does the moving, and only when full).
 *  - 100k keys, 1M cap: the same with `memoryStore({ maxKeys: 1_000_000 })`: a store far from full.
 *  Rows with a Floodgate-only scenario are compared with the peers' rows of the base scenario.
 *  - mostly denied: one key whose limit (1 per day) was used up before measuring; the clock
 *    advances 1 ms per call, so every measured call is a denial with a computed retryAfterMs.
 *
 * Peers (they read Date.now themselves):
 *  - rate-limiter-flexible `RateLimiterMemory.consume` (points 1e12 per 1 s for the admitting
 *    rows, 1 per day for the denied row). It rejects on deny, so every rlf row is
 *    `consume(key).catch(ignore)`, as a caller must write it.
 *  - express-rate-limit `MemoryStore.increment` (windowMs 60 s). It only counts (the middleware
 *    decides), so its denied row is the same work as its admitted one.
 *  - a plain `Map<string, number>` counter inside an async function: the floor for a keyed,
 *    promise-returning decision.
 *  - `async () => 1`: no work at all, only the promise and the await every row above pays. When
 *    half of express-rate-limit's figure is below this row, no promise-returning call can be
 *    twice as fast as express-rate-limit in this harness, whatever it does.
 *
 * Figures: a row's ns per decision is the median (p50) of mitata's samples, which resists other
 * load on the machine better than the mean; the whole suite runs `--rounds N` times (default 5)
 * in the same process and each row reports its lowest round (other processes only ever add
 * time), with the spread between its rounds.
 *
 * Floor of `limit()`: per algorithm, "decide() + one awaited promise" is
 * `Promise.resolve(limiter.decide(key))`, awaited: the decision, one promise holding it and one
 * await, the least any promise of a decision costs. Column limit/floor = `limit()` ÷ that row.
 *
 * Before and after in one run: `--baseline <dir>` (a copy of an earlier commit made by
 * `scripts/bench-baseline.sh <commit> [dir]`) adds every Floodgate row for that copy too,
 * labelled "(baseline)", measured in the same rounds beside the working tree's; column
 * vs baseline = this row ÷ the baseline's same row (< 1: faster now).
 *
 * Flags: --rounds N; --baseline <dir>; --scenarios hot,now,100k,1m,denied (default all);
 * --algorithms tokenBucket,... (default all); --mitata prints mitata's own report as well;
 * --json writes the figures as JSON to stdout after the table.
 */
import { bench, run } from "mitata";
import { BASELINE_SUFFIX, copies } from "./copies.ts";
import {
  ADMIT_SCENARIO,
  algorithmOf,
  ALGORITHMS,
  CLOCK,
  copyOf,
  currentOf,
  ERL,
  floodgate,
  FLOOR,
  MAP,
  NOOP,
  peer,
  PEER_SCENARIO,
  peerRuns,
  PEERS,
  type Scenario,
  SCENARIO_NAMES,
  SCENARIOS as ALL_SCENARIOS,
  skip,
  subjectsOf,
  useCopies,
  warmUp,
} from "./core-rows.ts";

const listFlag = (name: string): string[] | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1]!.split(",");
};
const scenarioNames = listFlag("scenarios");
for (const name of scenarioNames ?? []) {
  if (!(name in SCENARIO_NAMES)) {
    throw new Error(`--scenarios: unknown ${name}; expected some of ${Object.keys(SCENARIO_NAMES).join(",")}`);
  }
}
/** The scenarios measured; a Floodgate-only scenario brings the peers' rows it is compared with. */
const chosen = new Set(scenarioNames?.map((n) => SCENARIO_NAMES[n]!) ?? ALL_SCENARIOS);
const SCENARIOS = ALL_SCENARIOS.filter((sc) =>
  chosen.has(sc) || [...chosen].some((c) => PEER_SCENARIO[c] === sc || ADMIT_SCENARIO[c] === sc)
);
const algorithms = listFlag("algorithms");
for (const name of algorithms ?? []) {
  if (!(name in ALGORITHMS)) throw new Error(`--algorithms: unknown ${name}; expected some of ${Object.keys(ALGORITHMS).join(",")}`);
}
await useCopies(copies());
const SUBJECTS = subjectsOf().filter((s) => algorithms === undefined || algorithms.includes(algorithmOf(s)));
/** Floodgate's rows of a scenario: the chosen scenarios, and the admitting rows a chosen denied row is compared with. */
const floodgateRuns = (scenario: Scenario): boolean => chosen.has(scenario) || [...chosen].some((sc) => ADMIT_SCENARIO[sc] === scenario);

const rowName = (subject: string, scenario: Scenario): string => `${subject} | ${scenario}`;

/** Registers every row; mitata forgets its rows after each `run()`, so this runs once per round. */
function register(): void {
  for (const scenario of SCENARIOS) {
    for (const subject of SUBJECTS) {
      if (skip(algorithmOf(subject), scenario) || !floodgateRuns(scenario)) continue;
      bench(rowName(subject, scenario), async function* () {
        yield await floodgate(subject, scenario);
      });
    }
    if (PEER_SCENARIO[scenario] !== scenario) continue;
    for (const name of PEERS.filter((p) => peerRuns(p, scenario))) {
      bench(rowName(name, scenario), async function* () {
        const { fn, dispose } = await peer(name, scenario);
        yield fn;
        dispose();
      });
    }
  }
}

// Warm every Floodgate path first (see warmUp).
await warmUp();

const raw = process.argv.includes("--mitata");
const roundsFlag = process.argv.indexOf("--rounds");
const ROUNDS = roundsFlag === -1 ? 5 : Number(process.argv[roundsFlag + 1]);
/** Per row, the p50 of each round; a row's figure is the lowest of its rounds. */
const samples = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  register();
  const { benchmarks } = await run(raw ? {} : { format: "quiet" });
  if (benchmarks.length === 0) throw new Error("no benchmark ran");
  for (const trial of benchmarks) {
    const stats = trial.runs[0]?.stats;
    if (stats === undefined) throw new Error(`${trial.alias} failed: ${String(trial.runs[0]?.error)}`);
    samples.set(trial.alias, [...(samples.get(trial.alias) ?? []), stats.p50]);
  }
}
const ns = new Map<string, number>([...samples].map(([alias, p50s]) => [alias, Math.min(...p50s)]));
const spread = new Map<string, number>([...samples].map(([alias, p50s]) => [alias, Math.max(...p50s) / Math.min(...p50s)]));
const get = (subject: string, scenario: Scenario): number => ns.get(rowName(subject, scenario))!;

const pad = (s: string, n: number): string => s.padEnd(n);
const num = (x: number, digits = 1): string => x.toFixed(digits);
console.log(
  `\nnode ${process.version}, ${process.platform}/${process.arch}; ns per decision = p50 of mitata's samples, lowest of ${ROUNDS} round(s) (spread = highest/lowest round); decisions/s = 1e9 / ns`,
);
console.log(
  "targets: ERL/FG >= 2.00 (2x faster than express-rate-limit MemoryStore), FG/Map <= 1.50 (within 1.5x of the async Map counter), deny/admit <= 1.00\n",
);
const baseline = SUBJECTS.some((s) => copyOf(s) !== "");
const header = `| ${pad("subject", baseline ? 45 : 34)} | ${pad("scenario", 17)} | ${pad("ns/decision", 11)} | ${pad("spread", 6)} | ${
  pad("decisions/s", 11)
} | ${pad("ERL/FG", 6)} | ${pad("FG/Map", 6)} | ${pad("deny/admit", 10)} | ${pad("limit/floor", 11)} |${baseline ? " vs baseline |" : ""}`;
console.log(header);
console.log(header.replace(/[^|]/g, "-"));
const json: Record<string, unknown>[] = [];
let failures = 0;
for (const scenario of SCENARIOS) {
  const peers = PEER_SCENARIO[scenario] === scenario ? PEERS.filter((p) => peerRuns(p, scenario)) : [];
  const ourRows = floodgateRuns(scenario) ? SUBJECTS.filter((a) => !skip(algorithmOf(a), scenario)) : [];
  // Each working-tree row, then its baseline, then the next.
  ourRows.sort((a, b) => ourRows.indexOf(currentOf(a)) - ourRows.indexOf(currentOf(b)) || (copyOf(a) === "" ? -1 : 1));
  for (const subject of [...ourRows, ...peers]) {
    const t = get(subject, scenario);
    const floor = subject.endsWith(FLOOR);
    const ours = algorithmOf(subject) in ALGORITHMS && !floor;
    const isLimit = ours && currentOf(subject) === algorithmOf(subject);
    const vsFloor = isLimit ? t / get(`${algorithmOf(subject)}${FLOOR}`, scenario) : undefined;
    const vsBaseline = ours && baseline && copyOf(subject) === "" ? t / get(`${subject}${BASELINE_SUFFIX}`, scenario) : undefined;
    const vsErl = get(ERL, PEER_SCENARIO[scenario]) / t;
    const vsMap = t / get(MAP, PEER_SCENARIO[scenario]);
    const admitScenario = ADMIT_SCENARIO[scenario];
    const denyAdmit = admitScenario === undefined || !ns.has(rowName(subject, admitScenario)) ? undefined : t / get(subject, admitScenario);
    const ok = !ours || (vsErl >= 2 && vsMap <= 1.5 && (denyAdmit === undefined || denyAdmit <= 1));
    if (!ok && copyOf(subject) === "") failures++;
    console.log(
      `| ${pad(subject, baseline ? 45 : 34)} | ${pad(scenario, 17)} | ${num(t).padStart(11)} | ${
        num(spread.get(rowName(subject, scenario))!, 2).padStart(6)
      } | ${Math.round(1e9 / t).toLocaleString("en-US").padStart(11)} | ` +
        `${(ours ? num(vsErl, 2) : "").padStart(6)} | ${(ours ? num(vsMap, 2) : "").padStart(6)} | ${
          (denyAdmit === undefined ? "" : num(denyAdmit, 2)).padStart(10)
        } | ${(vsFloor === undefined ? "" : num(vsFloor, 2)).padStart(11)} |` +
        `${baseline ? ` ${(vsBaseline === undefined ? "" : num(vsBaseline, 2)).padStart(11)} |` : ""}${ours && !ok ? " MISSED" : ""}`,
    );
    json.push({
      subject,
      scenario,
      ns: t,
      perSecond: 1e9 / t,
      ...(ours ? { vsErl, vsMap } : {}),
      ...(denyAdmit === undefined ? {} : { denyAdmit }),
      ...(vsFloor === undefined ? {} : { vsFloor }),
      ...(vsBaseline === undefined ? {} : { vsBaseline }),
    });
  }
}
console.log(failures === 0 ? "\nall Floodgate rows meet the targets" : `\n${failures} Floodgate row(s) miss a target`);
for (const scenario of SCENARIOS.filter((sc) => PEER_SCENARIO[sc] === sc && ns.has(rowName(ERL, sc)))) {
  const half = get(ERL, scenario) / 2;
  const floor = get(NOOP, scenario);
  console.log(
    `${scenario}: half of express-rate-limit = ${num(half)} ns, async no-op = ${num(floor)} ns` +
      (floor > half ? " (no promise-returning call can reach 2x express-rate-limit here)" : ""),
  );
}
if (ns.has(rowName(CLOCK, "hot key"))) {
  // express-rate-limit's increment reads Date.now() itself; a decision on the real clock must too.
  const half = get(ERL, "hot key") / 2;
  const clock = get(CLOCK, "hot key");
  console.log(
    `Date.now() alone = ${num(clock)} ns: a decision on the real clock has ${
      num(half - clock)
    } ns left for everything else to be 2x express-rate-limit's hot key (half = ${num(half)} ns)`,
  );
}
if (process.argv.includes("--json")) console.log(JSON.stringify(json));
