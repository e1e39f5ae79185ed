import { FloodgateError, type Policy, type PolicyKind, type PolicySet } from "@floodgate/core/store";
import { floats } from "./clients.ts";
import type { CounterKind } from "./sql/counter.ts";

/** What a call needs of a policy set, computed once per set. */
export interface Prepared {
  readonly kinds: string;
  readonly lims: string;
  readonly pars: string;
  readonly blocks: string | null;
  readonly count: number;
  readonly policies: readonly Policy[];
  /** One counter policy: its kind, limit and parameter, charged by its kind's statement (sql/direct.ts). */
  readonly counter: { readonly kind: CounterKind; readonly limit: number; readonly parameter: number } | null;
}

const KIND_CODES: Readonly<Record<string, string>> = {
  "token-bucket": "t",
  "fixed-window": "f",
  "sliding-window": "s",
  "sliding-log": "l",
  concurrency: "c",
};

/** The kinds the store's functions decide (a calendar window's periods need a time-zone calendar they do not have). */
export const STORED_KINDS = Object.keys(KIND_CODES) as PolicyKind[];

/** A token bucket's µs per token (an integer), or a window's ms: the number the functions take beside the limit. */
const parameterOf = (p: Policy): number => (p.kind === "token-bucket" ? Math.round(p.intervalMs * 1000) : p.windowMs);

/** A set's kind letters, limits, parameters and blocks as the functions take them. */
export function prepareSet(set: PolicySet): Prepared {
  let kinds = "";
  for (const p of set.policies) {
    const code = KIND_CODES[p.kind];
    if (code === undefined) {
      throw new FloodgateError(
        "INVALID_ARGUMENT",
        `postgres store: policy "${p.name}" is of kind "${p.kind}", which this store does not implement; it implements ${
          Object.keys(KIND_CODES).join(", ")
        }.`,
      );
    }
    kinds += code;
  }
  const blocking = set.policies.some((p) => p.blockMs > 0);
  return {
    kinds,
    lims: floats(set.policies.map((p) => p.limit)),
    pars: floats(set.policies.map(parameterOf)),
    blocks: blocking ? floats(set.policies.map((p) => p.blockMs)) : null,
    count: set.policies.length,
    policies: set.policies,
    counter: set.policies.length === 1 && (kinds === "t" || kinds === "f" || kinds === "s")
      ? { kind: kinds, limit: set.policies[0]!.limit, parameter: parameterOf(set.policies[0]!) }
      : null,
  };
}
