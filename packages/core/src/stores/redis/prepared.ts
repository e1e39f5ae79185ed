import { ALGORITHMS } from "../../algorithms/registry.ts";
import { FloodgateError } from "../../errors.ts";
import type { PolicySet } from "../store.ts";
import { type LuaScript, luaScripts } from "./lua.ts";

/** Whether a store's server is known to hold a script: until then, and after a NOSCRIPT, calls EVAL. */
export type ScriptGate = { loaded: boolean };

/** Everything about a policy set a call needs, computed once per set. */
export interface Prepared {
  readonly script: LuaScript;
  /** Whether this store's server is known to hold `script` (shared by every set on it). */
  readonly gate: ScriptGate;
  readonly count: number;
  /** ARGV after the cost: per policy (kind letter in the multi script,) limit, parameter. */
  readonly tail: readonly string[];
  /** The whole ARGV of a consume of cost 1 and of a peek on the server's clock: the same every call. */
  readonly consume1: readonly string[];
  readonly peek: readonly string[];
  /** Per policy its `block` in ms, sent after the time with a consume; empty when no policy blocks. */
  readonly blocks: readonly string[];
  /** Per policy: kind letter, limit, parameter (the admin and reservation scripts' form, single policies too). */
  readonly multiTail: readonly string[];
  /** Whether ARGV may be precomputed: the store owns the clock and no parameter depends on it. */
  readonly constant: boolean;
  /**
   * Sets with a parameter depending on the clock (a calendar window's boundaries): `tail` and
   * `multiTail` at the client's `nowMs`; undefined for every other set.
   */
  readonly at: ((nowMs: number) => { tail: readonly string[]; multiTail: readonly string[] }) | undefined;
  /** A single policy whose script may answer a charge in short: reads that as the usual result (undefined: not a short answer). */
  readonly fast: ((reply: unknown, cost: number) => number[] | undefined) | undefined;
  /** The script of a charge of 1 on the server's clock, when the kind has one (ARGV: `tail`), with its gate. */
  readonly one: { readonly script: LuaScript; readonly gate: ScriptGate } | undefined;
}

/** The tails of {@link Prepared} at `nowMs`, for a set some of whose parameters depend on the clock. */
function tailsAt(set: PolicySet, multi: boolean, nowMs: number): { tail: readonly string[]; multiTail: readonly string[] } {
  const tail: string[] = [];
  const multiTail: string[] = [];
  for (const p of set.policies) {
    const lua = ALGORITHMS[p.kind].lua;
    const parameter = String(lua.parameterAt === undefined ? lua.parameter(p) : lua.parameterAt(p, nowMs));
    if (multi) tail.push(lua.code);
    tail.push(String(p.limit), parameter);
    multiTail.push(lua.code, String(p.limit), parameter);
  }
  return { tail, multiTail };
}

/** The per-policy arguments of the admin and reservation scripts at `nowMs`. */
export const multiTailOf = (prepared: Prepared, nowMs: number): readonly string[] =>
  prepared.at === undefined ? prepared.multiTail : prepared.at(nowMs).multiTail;

/**
 * What the script store computes once per policy set: the script (multi-policy for several
 * policies or a blocking one), its ARGV tails, and for a kind with a first step its charge-of-1
 * script and the reading of its short answer. A limit the kind's Redis state cannot hold is an
 * INVALID_ARGUMENT naming the policy.
 */
export function prepareSet(name: string, set: PolicySet, ownsClock: boolean, gateOf: (script: LuaScript) => ScriptGate): Prepared {
  const tail: string[] = [];
  const multiTail: string[] = [];
  // A policy's block is applied by the multi-policy script, one policy or several.
  const blocking = set.policies.some((p) => p.blockMs > 0);
  const multi = set.policies.length > 1 || blocking;
  for (const p of set.policies) {
    const lua = ALGORITHMS[p.kind].lua;
    if (lua.maxLimit !== undefined && p.limit > lua.maxLimit) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `${name} store: ${
          p.kind.replace(/-/g, " ")
        } "${p.name}" has limit ${p.limit}; Redis stores accept ${p.kind} limits up to ${lua.maxLimit}.`,
      );
    }
    if (multi) tail.push(lua.code);
    tail.push(String(p.limit), String(lua.parameter(p)));
    multiTail.push(lua.code, String(p.limit), String(lua.parameter(p)));
  }
  const blocks = blocking ? set.policies.map((p) => String(p.blockMs)) : [];
  const clocked = set.policies.some((p) => ALGORITHMS[p.kind].lua.parameterAt !== undefined);
  const scripts = luaScripts();
  const script = multi ? scripts.multi : scripts[set.policies[0]!.kind];
  const single = set.policies[0]!;
  const fast = multi || clocked ? undefined : ALGORITHMS[single.kind].lua.fast;
  const gate = gateOf(script);
  const oneScript = fast === undefined || !ownsClock ? undefined : scripts[`${single.kind}:1`];
  const prepared: Prepared = Object.freeze({
    script,
    gate,
    count: set.policies.length,
    tail: Object.freeze(tail),
    consume1: Object.freeze(blocking ? ["1", ...tail, "", ...blocks] : ["1", ...tail]),
    peek: Object.freeze(["0", ...tail]),
    blocks: Object.freeze(blocks),
    multiTail: Object.freeze(multiTail),
    constant: ownsClock && !clocked,
    at: clocked ? (nowMs: number) => tailsAt(set, multi, nowMs) : undefined,
    one: oneScript === undefined ? undefined : { script: oneScript, gate: gateOf(oneScript) },
    fast: fast === undefined ? undefined : expanding(fast.expand, single.limit, ALGORITHMS[single.kind].lua.parameter(single)),
  });
  return prepared;
}

/** A kind's reading of its first step's short answer, for one policy: its limit and parameter computed once. */
const expanding = (
  expand: (reply: unknown, cost: number, limit: number, parameter: number) => number[] | undefined,
  limit: number,
  parameter: number,
) =>
(reply: unknown, cost: number): number[] | undefined => expand(reply, cost, limit, parameter);
