import { FIELDS_PER_POLICY, toMicros } from "../../algorithms/algorithm.ts";
import { ALGORITHMS } from "../../algorithms/registry.ts";
import { describeValue, FloodgateError } from "../../errors.ts";
import { leasedLimits } from "../../leases/rules.ts";
import type { CallSignal, LeaseRequest, PolicySet, StoreResult } from "../store.ts";
import type { DenyCache } from "./deny-cache.ts";
import { leaseLuaScript } from "./lease-lua.ts";

/** What a Redis store hands the lease call: its transport and deny cache, and the set's prepared figures. */
export interface LeaseContext {
  readonly name: string;
  readonly ownsClock: boolean;
  readonly transport: {
    evalsha(sha: string, keys: string[], args: readonly string[]): Promise<unknown>;
    eval(source: string, keys: string[], args: readonly string[]): Promise<unknown>;
  };
  readonly cache: DenyCache | undefined;
  /** The set's id in the deny cache and its policies' limits. */
  readonly setId: number;
  readonly limits: readonly number[];
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

const monotonic = (): number => globalThis.performance?.now?.() ?? Date.now();

/** True for NOSCRIPT at the start of the message (see script-store.ts). */
function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : typeof error === "string" ? error : "";
  return message.startsWith("NOSCRIPT") || message.startsWith("Command failed: NOSCRIPT");
}

function failure(name: string, error: unknown): FloodgateError {
  if (error instanceof FloodgateError) return error;
  const message = error instanceof Error ? error.message : describeValue(error);
  return new FloodgateError("STORE_ERROR", `${name} store: lease failed: ${message}`, { cause: error });
}

/**
 * One lease call: the deny cache first (a remembered denial answers with no round trip, and
 * sends nothing: the caller keeps its returns for a later call), unless the call gives units
 * back (they may admit this very request, and would be idle until then), then the lease script
 * (EVALSHA, EVAL on NOSCRIPT unless the caller gave up).
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
  const cache = ctx.cache;
  const sentAt = ctx.ownsClock ? monotonic() : nowMs;
  if (cache !== undefined && cache.size > 0 && request.cost > 0 && !returns.some((r) => r.unspent > 0)) {
    const hit = cache.check(base, ctx.setId, request.cost, sentAt);
    if (hit !== undefined) {
      const padded = hit.slice();
      while (padded.length < length) padded.push(0);
      return padded;
    }
  }
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
  const generation = cache?.generation ?? 0;
  let reply: unknown;
  try {
    reply = await ctx.transport.evalsha(script.sha, all, args);
  } catch (error) {
    if (!isNoScript(error)) throw failure(ctx.name, error);
    if (signal?.aborted === true) {
      throw new FloodgateError(
        "STORE_TIMEOUT",
        `${ctx.name} store: lease was abandoned before the script was loaded; it was not sent again.`,
      );
    }
    try {
      reply = await ctx.transport.eval(script.source, all, args);
    } catch (retryError) {
      throw failure(ctx.name, retryError);
    }
  }
  if (!Array.isArray(reply) || reply.length !== length || !reply.every((v) => typeof v === "number")) {
    throw new FloodgateError(
      "STORE_ERROR",
      `${ctx.name} store: lease got an unexpected reply from Redis (${describeValue(reply)}); expected an array of ${length} integers.`,
    );
  }
  const result = reply as number[];
  if (cache !== undefined && request.cost > 0 && result[0] === 0 && cache.generation === generation) {
    cache.remember(base, ctx.setId, request.cost, sentAt, result.slice(0, 1 + count * FIELDS_PER_POLICY), ctx.limits, request.lifeMs);
  }
  return result;
}
