import type { Policy } from "../policies.ts";

// The one place the HTTP layer asks whether a policy counts requests in flight (it holds a unit
// from the decision to the end of the response) rather than requests in a window: rules reserve
// for it, and headers report it in an item of its own, never as the quota the client acts on.

/** Whether `policy` holds units while requests are in flight (a `concurrency()` policy). */
export function holdsInFlight(policy: Policy): boolean {
  return policy.kind === "concurrency";
}
