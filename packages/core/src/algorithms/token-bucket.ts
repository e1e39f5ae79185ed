import { FloodgateError } from "../errors.ts";
import type { Policy } from "../policy.ts";
import { type OptionSpecs, parseOptions } from "../validation.ts";
import {
  ALGORITHM,
  type Algorithm,
  type AlgorithmDefinition,
  type AlgorithmTraits,
  ceilMs,
  type LuaAlgorithm,
  NEVER,
  settleByDifference,
  settleFragment,
} from "./algorithm.ts";
import { BLOCK, LIMIT, NAME } from "./window-options.ts";
import { BLOCK_EXPIRY, BLOCK_OVER, FLAG, FLAG_VALUE, keptExpiry } from "./block-flag.ts";
import { answer, closeStep, openStep, readStep } from "./first-step.ts";
import { type Duration, durationMs } from "../duration.ts";

/**
 * Most µs a token bucket takes to refill from empty (capacity × µs per token, ~71 years): keeps
 * the arrival time, now + up to twice that, an exact integer in doubles (and in Redis's Lua).
 */
export const MAX_BUCKET_US = 2_251_799_813_685_248; // 2 ** 51

const TOKEN_BUCKET_OPTIONS: OptionSpecs = {
  capacity: LIMIT,
  refillRate: [(v) => typeof v === "number" && v > 0 && v <= 1_000_000, "tokens per second: a finite number > 0 and <= 1000000", 1],
  name: NAME,
  block: BLOCK,
};

/** Options of {@link tokenBucket}. */
export interface TokenBucketOptions {
  /** Maximum tokens the bucket holds: the largest burst admitted at once. */
  capacity: number;
  /** Tokens added per second, continuously (fractions allowed: `100 / 60` is 100 per minute). */
  refillRate: number;
  /** Policy name; default `"<capacity>-burst-<refillRate>-per-s"`. */
  name?: string;
  /** Once this policy denies a request, keep the key denied for this long (e.g. `"1h"`). Default: no block. */
  block?: Duration;
}

/** Microseconds per token of a token bucket, an exact integer. */
export function intervalUs(p: Policy): number {
  return Math.round(p.intervalMs * 1000);
}

const refundBucket: Algorithm["refund"] = (p, s, o, _log, now, cost, mark) => {
  const tat = s[o]!;
  if (tat > now && (mark === undefined || tat === mark)) s[o] = Math.max(now, tat - cost * intervalUs(p));
  return s[o]!;
};

/** A bucket refills while a lease lives: what it refills in the lease's life is kept in reserve. */
const TOKEN_BUCKET_TRAITS: AlgorithmTraits = {
  lease: { reserve: (p, lifeMs) => Math.ceil((lifeMs * 1000) / intervalUs(p)), windowed: false },
  holdsUnits: false,
  cachesDenials: true,
};

/** Token bucket as GCRA: the state is the theoretical arrival time (µs) of the next request. */
export const TOKEN_BUCKET: Algorithm = {
  traits: TOKEN_BUCKET_TRAITS,
  width: 1,
  keepsLog: false,
  apply(p, s, o, _log, now, cost, out, i, charge) {
    const interval = intervalUs(p);
    const limit = p.limit;
    const tau = limit * interval;
    const tat = Math.max(s[o]!, now);
    const next = tat + cost * interval;
    if (cost <= limit && next - now <= tau) {
      out[i] = 1;
      out[i + 3] = 0;
      if (charge) {
        s[o] = next;
        out[i + 1] = Math.floor((tau - (next - now)) / interval);
        out[i + 2] = ceilMs(next);
        return next;
      }
    } else {
      out[i] = 0;
      out[i + 3] = cost > limit ? NEVER : ceilMs(next - tau - now);
    }
    // Negative only after the clock stepped back past the stored arrival time.
    out[i + 1] = Math.max(0, Math.floor((tau - (tat - now)) / interval));
    out[i + 2] = ceilMs(tat);
    return next;
  },
  // A lease's units are charged as if spent at the lease's end (see the Lua `grant` fragment).
  grant(p, s, o, _log, now, req, granted, endUs, out, i, charge) {
    const interval = intervalUs(p);
    const tau = p.limit * interval;
    let tat = Math.max(s[o]!, now) + req * interval;
    if (tat < endUs) tat = endUs;
    const next = tat + granted * interval;
    const ok = req + granted <= p.limit && next - now <= tau;
    out[i] = ok ? 1 : 0;
    out[i + 1] = Math.max(0, Math.floor((tau - (tat - now)) / interval));
    out[i + 2] = ceilMs(tat);
    out[i + 3] = 0;
    if (ok && charge) {
      s[o] = next;
      out[i + 1] = Math.floor((tau - (next - now)) / interval);
      out[i + 2] = ceilMs(next);
    }
    return next;
  },
  // The mark is the arrival time the charge left. While it is still stored, no grant came since
  // but ones refunded since (every grant moves it later; a charge is refunded once, and a refund
  // into the newest grant undoes it): the request's cost is exactly the last `cost × interval` of
  // it, so moving it back by that (not before now: a bucket holds no more than full) is the
  // state without the request. After a later grant, the refill the request used may have been
  // absorbed by that grant's catching up with now: giving time back could exceed the bucket.
  refund: refundBucket,
  // An overcharge moves the arrival time later by its tokens, past a full bucket's debt (up to
  // MAX_BUCKET_US ahead of now): exactly the state had the request been charged its actual cost
  // when no request was granted since; after later grants, never less than that (each grant moves
  // the time by at most what the one before it moved it), possibly more.
  settle: /* @__PURE__ */ settleByDifference(refundBucket, (p, s, o, _log, now, cost) => {
    const tat = s[o]!;
    const next = Math.min(tat + cost * intervalUs(p), now + MAX_BUCKET_US);
    if (next > now && next > tat) s[o] = next;
    return s[o]!;
  }),
  accepts: (s, o) => Number.isSafeInteger(s[o]),
};

/**
 * A token bucket of `capacity` tokens refilled continuously at `refillRate` tokens per second
 * (stored as one theoretical-arrival time, GCRA-style). Admits bursts up to `capacity`, then
 * `refillRate` per second. `resetAt` is when the bucket is full again.
 *
 * @example
 * const burst = tokenBucket({ capacity: 100, refillRate: 10 }); // 100 at once, then 10/s
 */
export function tokenBucket(options: TokenBucketOptions): Policy {
  const o = parseOptions<TokenBucketOptions>(options, "tokenBucket()", TOKEN_BUCKET_OPTIONS);
  const intervalUs = Math.max(1, Math.round(1_000_000 / o.refillRate));
  if (o.capacity * intervalUs > MAX_BUCKET_US) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `tokenBucket(): \`capacity\` / \`refillRate\` is too large (${o.capacity} tokens at ${o.refillRate} per second); expected the time to refill from empty, capacity × ${intervalUs} µs per token, <= ${MAX_BUCKET_US} µs (about 71 years).`,
    );
  }
  const intervalMs = intervalUs / 1000;
  return Object.freeze({
    kind: "token-bucket" as const,
    name: o.name ?? `${o.capacity}-burst-${+o.refillRate.toFixed(6)}-per-s`,
    limit: o.capacity,
    windowMs: (o.capacity * intervalUs) / 1000,
    refillRate: o.refillRate,
    intervalMs,
    blockMs: o.block === undefined ? 0 : durationMs(o.block)!,
    [ALGORITHM]: TOKEN_BUCKET,
  });
}

/**
 * The bucket's state read into \`tat\` (the arrival time, µs; 0 when absent) and \`fl\` (whether
 * it carries the block flag, see block-flag.ts).
 */
const TB_READ = /* @__PURE__ */ (() =>
  `local tat, fl = -(tonumber(redis.pcall("GET", k)) or 0), false
if tat >= ${FLAG} then tat, fl = tat - ${FLAG}, true end
`)();

/** Writes the arrival time \`t\` (µs) with its expiry, keeping a flag read in \`fl\` and its expiry. */
const tbWrite = (t: string): string =>
  `if fl then redis.call("SET", k, fmt("%d", -${t} - ${FLAG}), "PX", fmt("%d", ${keptExpiry(`max(1, ceil((${t} - now) / 1000))`)}))
else redis.call("SET", k, fmt("%d", -${t}), "PX", fmt("%d", max(1, ceil((${t} - now) / 1000)))) end
`;

/**
 * The single-policy script's first step for a charge: one \`GET\` and, when admitted, one
 * \`SET … PX\`, no read of the block key unless the state is flagged (see block-flag.ts). It
 * decides a missing state (an unblocked key, see block-flag.ts), an unflagged one, or a flagged
 * one whose block is over, and answers the state it read and the clock (first-step.ts), which
 * {@link expandBucket} reads as the usual result. Anything else (a block, another kind's state)
 * falls through to the general path. \`one\`: the script for a charge of 1 on the server's clock,
 * whose ARGV are only the limit and the µs per token.
 */
const tbFast = (one: boolean): string => {
  const [L, P, cost] = one ? ["ARGV[1]", "ARGV[2]", "1"] : ["ARGV[2]", "ARGV[3]", "cost"];
  return `${openStep(one)}local v = redis.pcall("GET", KEYS[1])
local s = tonumber(v) or v == false and 0
if s and s <= -${FLAG} and ${BLOCK_OVER} then s = s + ${FLAG} end
if s and s > -${FLAG} then
local P, tat = ${P} + 0, -s
if tat < now then tat = now end
local nxt = tat + ${cost} * P
if nxt - now <= ${L} * P then redis.call("SET", KEYS[1], string.format("%d", -nxt), "PX", string.format("%d", math.ceil((nxt - now) / 1000))) end
${answer(`(v or "")`)}
end
${closeStep(one)}`;
};

/**
 * The first step's answer as the script's usual result of a charge of \`cost\`: the same decision
 * and figures, by the same double arithmetic, as the eval and commit fragments'. A flagged
 * state's value is read without its flag (the step answers only for a state with its block over).
 */
function expandBucket(reply: unknown, cost: number, limit: number, interval: number): number[] | undefined {
  const step = readStep(reply);
  if (step === undefined) return undefined;
  const { now } = step;
  let stored = step.state === "" ? 0 : Number(step.state);
  if (!Number.isSafeInteger(stored)) return undefined;
  if (stored <= -FLAG_VALUE) stored += FLAG_VALUE;
  const tat = Math.max(-stored, now);
  const tau = limit * interval;
  const nxt = tat + cost * interval;
  if (cost <= limit && nxt - now <= tau) return [1, 1, Math.floor((tau - (nxt - now)) / interval), Math.ceil(nxt / 1000), 0, nxt];
  return [
    0,
    0,
    Math.max(0, Math.floor((tau - (tat - now)) / interval)),
    Math.ceil(tat / 1000),
    cost > limit ? NEVER : Math.ceil((nxt - tau - now) / 1000),
  ];
}

/**
 * Flags the bucket in \`k\` as blocked (see block-flag.ts): its value 2^52 lower (a missing one,
 * or another kind's number, as an empty bucket's), to live at least until the block ends.
 */
const TB_BLOCK_MARK = /* @__PURE__ */ (() =>
  `local fv = tonumber(redis.pcall("GET", k)) or 0
if fv > 0 then fv = 0 end
if fv > -${FLAG} then fv = fv - ${FLAG} end
redis.call("SET", k, fmt("%d", fv), "PX", fmt("%d", ${BLOCK_EXPIRY}))
`)();

/**
 * GCRA in Lua. Parameter: µs per token. Carried from eval to commit: a = new tat, b = the flag.
 * Stored negated: every other kind's integer is >= 0, so none can pass for an arrival time (nor
 * one for a fixed-window count) after a limiter changes kind under the same prefix.
 * Redis state: the integer minus the theoretical arrival time (µs), minus 2^52 while flagged.
 */
const TOKEN_BUCKET_LUA: LuaAlgorithm = /* @__PURE__ */ (() => ({
  code: "t",
  parameter: intervalUs,
  fast: { source: tbFast, expand: expandBucket },
  blockMark: TB_BLOCK_MARK,
  flag: { read: "b", clear: "b = false" },
  fragments: {
    eval: `${TB_READ}if tat < now then tat = now end
local tau, nxt = L * P, tat + cost * P
ok = cost <= L and nxt - now <= tau
out[i], out[i + 1], out[i + 2] = ok and 1 or 0, max(0, floor((tau - (tat - now)) / P)), ceil(tat / 1000)
if ok then out[i + 3] = 0 elseif cost > L then out[i + 3] = -1 else out[i + 3] = ceil((nxt - tau - now) / 1000) end
a, b = nxt, fl
`,
    commit: `local fl = b
${tbWrite("a")}out[i + 1], out[i + 2], out[j] = floor((L * P - (a - now)) / P), ceil(a / 1000), a
`,
    settle: /* @__PURE__ */ settleFragment(
      `${TB_READ}if tat > now and tat == m then
  tat = max(now, tat - cost * P)
  ${tbWrite("tat")}end
`,
      `${TB_READ}local nxt = math.min(tat + cost * P, now + ${MAX_BUCKET_US})
if nxt > now and nxt > tat then ${tbWrite("nxt")}end
`,
    ),
    // A lease's units are charged as if spent at the lease's end: a bucket that stays full
    // meanwhile forgets refill, so a unit charged earlier than it is spent would let any later
    // decision on the key (exact, or leased with another life) see up to a life's refill too
    // many. Charged at the end, the stored time is never earlier than exact mode's.
    grant: `${TB_READ}if tat < now then tat = now end
tat = tat + req * P
if tat < wend then tat = wend end
local tau, nxt = L * P, tat + g * P
ok = cost <= L and nxt - now <= tau
out[i], out[i + 1], out[i + 2], out[i + 3] = ok and 1 or 0, max(0, floor((tau - (tat - now)) / P)), ceil(tat / 1000), 0
a, b = nxt, fl
`,
    refund: `${TB_READ}if tat > now and (m == nil or tat == m) then
  tat = max(now, tat - cost * P)
  ${tbWrite("tat")}end
`,
  },
}))();

export const TOKEN_BUCKET_DEFINITION: AlgorithmDefinition<"token-bucket"> = {
  // The constant, not TOKEN_BUCKET.traits: a property read would keep this object in every bundle.
  traits: TOKEN_BUCKET_TRAITS,
  kind: "token-bucket",
  factoryName: "tokenBucket",
  lua: TOKEN_BUCKET_LUA,
  docs: {
    call: "tokenBucket({ capacity, refillRate })",
    statePerKey: "one number (GCRA)",
    guarantee: "bursts up to `capacity`, then `refillRate` per second; at most `capacity + refillRate × Δt` over any interval",
    resetAt: "when the bucket is full again",
  },
  exampleOptions: (limit, windowMs, name): TokenBucketOptions =>
    name === undefined
      ? { capacity: limit, refillRate: (limit * 1000) / windowMs }
      : { capacity: limit, refillRate: (limit * 1000) / windowMs, name },
  retentionMs: (p) => Math.ceil(p.windowMs),
};
