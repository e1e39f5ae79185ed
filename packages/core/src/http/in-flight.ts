import { traitsOf } from "../algorithms/algorithm.ts";
import type { Policy } from "../policy.ts";

// The one place the HTTP layer asks whether a policy counts requests in flight (it holds a unit
// from the decision to the end of the response) rather than requests in a window: rules reserve
// for it, and headers report it in an item of its own, never as the quota the client acts on.
// What a kind does is declared on its algorithm (its traits).

/** Whether `policy` holds units while requests are in flight (a `concurrency()` policy). */
export function holdsInFlight(policy: Policy): boolean {
  return traitsOf(policy).holdsUnits;
}
