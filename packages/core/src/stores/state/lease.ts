import { type Algorithm, FIELDS_PER_POLICY, markOf } from "../../algorithms/algorithm.ts";
import { leasedLimits } from "../../leases/rules.ts";
import { overrideBlocked } from "../block.ts";
import type { Policy } from "../../policy.ts";
import type { LeaseRequest, PolicySet } from "../store.ts";
import type { StateEvaluation } from "./types.ts";
import { leaseReplyLength, type Unpacked, written } from "./unpacked.ts";

/*
 * A leased call on plain-data state, step for step what the Redis lease script does (see
 * stores/redis/lease-lua.ts), so a store without scripts decides leased requests exactly as the
 * Redis stores do: give back what returned leases did not spend (once, into what each was
 * charged in), decide the request, then charge a new lease only when every policy keeps enough.
 */

/** A policy as a leased set decides it: its limit less its lease reserve. */
const leasedPolicy = (p: Policy, limit: number): Policy => (limit === p.limit ? p : Object.create(p, { limit: { value: limit } }));

/** Evaluates a lease call (see {@link evaluateState} mode `"lease"`) on `state`; `fresh` when the key had none. */
export function evaluateLease(
  set: PolicySet,
  algorithms: readonly Algorithm[],
  state: Unpacked,
  fresh: boolean,
  request: LeaseRequest,
  now: number,
  kinds: string,
): StateEvaluation {
  const n = algorithms.length;
  const length = leaseReplyLength(n);
  const limits = leasedLimits(set.policies, request.lifeMs);
  const policies = set.policies.map((p, i) => leasedPolicy(p, limits[i]!));

  // A retried call: its lease was recorded, so answer from the record and charge nothing again.
  const again = state.leases[request.id];
  if (again !== undefined) {
    const reply = again.slice();
    reply[length - 2] = Math.max(0, reply[length - 2]! - now);
    reply[length - 1] = now;
    return written(reply, kinds, state.expiresAtUs, state, false);
  }

  let changed = false;
  let expiry = fresh ? 0 : state.expiresAtUs;
  for (const back of request.returns ?? []) {
    const record = state.leases[back.id];
    if (record === undefined) continue;
    delete state.leases[back.id];
    changed = true;
    const units = Math.min(back.unspent, record[length - 3]!);
    if (!(units > 0)) continue;
    let e = 0;
    for (let p = 0; p < n; p++) {
      const x = algorithms[p]!.refund(policies[p]!, state.numbers, state.offsets[p]!, state.logs[p], now, units, record[1 + 4 * n + p]);
      if (x > e) e = x;
    }
    expiry = e;
  }

  const req = request.cost;
  const evaluate = (cost: number): number[] => {
    const out = [1];
    for (let p = 0; p < n; p++) {
      out.push(0, 0, 0, 0);
      algorithms[p]!.apply(policies[p]!, state.numbers, state.offsets[p]!, state.logs[p], now, cost, out, 1 + p * FIELDS_PER_POLICY, false);
      if (out[1 + p * FIELDS_PER_POLICY] === 0) out[0] = 0;
    }
    return out;
  };
  const commit = (cost: number, out: number[]): void => {
    let e = 0;
    for (let p = 0; p < n; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      const x = algorithms[p]!.apply(policies[p]!, state.numbers, state.offsets[p]!, state.logs[p], now, cost, out, i, true);
      if (x > e) e = x;
    }
    for (let p = 0; p < n; p++) out.push(markOf(algorithms[p]!, policies[p]!, state.numbers, state.offsets[p]!, state.logs[p]));
    expiry = e;
    changed = true;
  };

  /**
   * The request and a lease together: each kind's own `grant` when it has one (a token bucket
   * charges the lease's units at the lease's end), else `apply` of their sum; with `charge`,
   * charged into `into` (the figures of the evaluation that admitted it) with its marks.
   */
  const grant = (req: number, units: number, endUs: number, charge: boolean, into?: number[]): number[] => {
    const out = into ?? [1];
    let e = 0;
    for (let p = 0; p < n; p++) {
      const i = 1 + p * FIELDS_PER_POLICY;
      if (!charge) out.push(0, 0, 0, 0);
      const a = algorithms[p]!;
      const s = state.numbers;
      const x = a.grant !== undefined
        ? a.grant(policies[p]!, s, state.offsets[p]!, state.logs[p], now, req, units, endUs, out, i, charge)
        : a.apply(policies[p]!, s, state.offsets[p]!, state.logs[p], now, req + units, out, i, charge);
      if (!charge && out[i] === 0) out[0] = 0;
      if (x > e) e = x;
    }
    if (charge) {
      for (let p = 0; p < n; p++) out.push(markOf(algorithms[p]!, policies[p]!, state.numbers, state.offsets[p]!, state.logs[p]));
      expiry = e;
      changed = true;
    }
    return out;
  };

  const probe = req > 0 ? req : 1;
  let out = evaluate(probe);
  // A blocked key: denied as a consume is, nothing charged, no lease.
  if (state.blockedUntilUs > now) overrideBlocked(out, n, state.blockedUntilUs, now);
  let granted = 0;
  let life = Math.floor(request.lifeMs * 1000);
  let charged = false;
  if (out[0] === 1) {
    granted = request.want;
    let end = now + life;
    for (let p = 0; p < n; p++) {
      const rest = out[2 + p * FIELDS_PER_POLICY]! - req;
      if (rest < Math.max(Math.ceil(limits[p]! / 100), 2 * probe)) granted = 0;
      else granted = Math.min(granted, Math.floor(rest / 2));
      if (algorithms[p]!.traits.lease?.windowed === true) {
        const windowUs = set.policies[p]!.windowMs * 1000;
        end = Math.min(end, (Math.floor(now / windowUs) + 1) * windowUs);
      }
    }
    // What was wanted is for a whole lease life: a lease cut short by a window's end gets its share.
    if (end - now < life) granted = Math.min(granted, Math.floor((request.want * (end - now)) / life));
    if (end - now < Math.ceil(request.minLifeMs * 1000)) granted = 0;
    if (granted > 0) {
      const more = grant(req, granted, end, false);
      if (more[0] === 1) {
        grant(req, granted, end, true, more);
        out = more;
        charged = true;
      } else granted = 0;
    }
    if (granted === 0 && req > 0) {
      commit(req, out);
      charged = true;
    }
    life = end - now;
  }
  if (req === 0) out[0] = granted > 0 ? 1 : 0;
  out.length = 1 + n * FIELDS_PER_POLICY + (charged ? n : 0);
  // Marks only for what was charged: none for a denial, nor for a refresh that got no lease.
  const void_ = !charged || out[0] === 0 || (granted === 0 && req === 0);
  for (let p = 0; p < n; p++) {
    const at = 1 + n * FIELDS_PER_POLICY + p;
    if (void_ || out[at] === undefined) out[at] = 0;
  }
  out.push(granted, granted > 0 ? life : 0, now);
  if (granted > 0) {
    const record = out.slice();
    record[length - 2] = now + life;
    state.leases[request.id] = record;
  }
  if (!changed && fresh) return { result: out, state: undefined, changed: false, expiresAtMs: 0 };
  return written(out, kinds, Math.max(expiry, state.blockedUntilUs), state, changed, now);
}
