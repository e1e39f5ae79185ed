import { FIELDS_PER_POLICY, toMicros } from "../../algorithms/algorithm.ts";
import { ALGORITHMS } from "../../algorithms/registry.ts";
import { leasedLimits } from "../../leases/rules.ts";
import type { CallSignal, LeaseRequest, PolicySet, StoreResult } from "../store.ts";
import { leaseLuaScript } from "./lease-lua.ts";
import { abandoned, isNoScript, isResult, storeError, unexpectedReply } from "./replies.ts";

/** What a Redis store hands the lease call: its name, clock and transport. */
export interface LeaseContext {
  readonly name: string;
  readonly ownsClock: boolean;
  readonly transport: {
    evalsha(sha: string, keys: string[], args: readonly string[]): Promise<unknown>;
    eval(source: string, keys: string[], args: readonly string[]): Promise<unknown>;
  };
}

/** Per set and lease life: the script's per-policy arguments, token buckets less their reserve. */
const TAILS = new WeakMap<PolicySet, { lifeMs: number; tail: readonly string[] }>();

function tailOf(set: PolicySet, lifeMs: number): readonly string[] {
  const known = TAILS.get(set);
  if (known !== undefined && known.lifeMs === lifeMs) return known.tail;
  const limits = leasedLimits(set.policies, lifeMs);
  const tail: string[] = [];
  set.policies.forEach((p, index) => {
    const lua = ALGORITHMS[p.kind].lua;
    tail.push(lua.code, String(limits[index]), String(lua.parameter(p)));
  });
  TAILS.set(set, { lifeMs, tail });
  return tail;
}

/**
 * One lease call: the lease script (EVALSHA, EVAL on NOSCRIPT unless the caller gave up). The
 * deny cache in front of it is the wrapper's (deny-cache/).
 */
export async function leaseCall(
  ctx: LeaseContext,
  set: PolicySet,
  base: string,
  keys: string[],
  request: LeaseRequest,
  nowMs: number,
  signal?: CallSignal,
): Promise<StoreResult> {
  const count = set.policies.length;
  const returns = request.returns ?? [];
  const length = 1 + count * (FIELDS_PER_POLICY + 1) + 3;
  const args = [
    String(request.cost),
    String(request.want),
    String(Math.floor(request.lifeMs * 1000)),
    String(Math.ceil(request.minLifeMs * 1000)),
    String(returns.length),
    ctx.ownsClock ? "" : String(toMicros(nowMs)),
    ...tailOf(set, request.lifeMs),
  ];
  const all = [...keys, `${base}:l:${request.id}`];
  for (const r of returns) {
    all.push(`${base}:l:${r.id}`);
    args.push(String(r.unspent));
  }
  const script = leaseLuaScript();
  let reply: unknown;
  try {
    reply = await ctx.transport.evalsha(script.sha, all, args);
  } catch (error) {
    if (!isNoScript(error)) throw storeError(ctx.name, "lease", error);
    if (signal?.aborted === true) throw abandoned(ctx.name, "lease");
    try {
      reply = await ctx.transport.eval(script.source, all, args);
    } catch (retryError) {
      throw storeError(ctx.name, "lease", retryError);
    }
  }
  if (!isResult(reply, length)) throw unexpectedReply(ctx.name, "lease", reply, `an array of ${length} integers`);
  return reply;
}
