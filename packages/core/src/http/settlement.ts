import { describeValue } from "../errors.ts";
import type { Reservation } from "../limiter/index.ts";
import { isThenable } from "../stores/store.ts";
import type { EndedResponse, RateLimitRequest, SettledCost } from "./options.ts";
import type { RequestEnd, RequestRateLimitInfo } from "./result.ts";
import type { RuleCounter } from "./rules.ts";
import type { StoreOutcome } from "./store-errors.ts";
import type { Warnings } from "./warnings.ts";

// What happens to a reservation when its response ends: settled at the actual cost, or
// cancelled when the final status gives the request back (skipSuccessfulRequests etc.).

/** A response's headers, whichever kind it is: Node's `ServerResponse` or a fetch `Response`. */
function headerOf(response: unknown, name: string): string | undefined {
  const r = response as { getHeader?(name: string): unknown; headers?: { get?(name: string): string | null } } | undefined;
  const value = typeof r?.getHeader === "function" ? r.getHeader(name) : r?.headers?.get?.(name);
  if (value === undefined || value === null) return undefined;
  return Array.isArray(value) ? value.join(", ") : String(value);
}

const isUnits = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER;

/**
 * The end of a reserved request: its actual cost settled (what `actual` says of a response sent
 * completely; else the handler's report; else the estimate), or the reservation cancelled when
 * `refundWhen` says the final status gives the request back. Runs once; never throws: an
 * `actual` that throws or returns something else than units is logged, and the report or the
 * estimate settled instead.
 */
export function reservationEnd<Raw>(
  limiter: RuleCounter,
  outcome: StoreOutcome & { readonly reservation: Reservation },
  info: RequestRateLimitInfo,
  req: RateLimitRequest<Raw>,
  actual: SettledCost<Raw>["actual"],
  refundWhen: ((status: number) => boolean) | undefined,
  warnings: Warnings,
  settledCost: boolean,
): RequestEnd {
  const { source, reservation } = outcome;
  return (status, response, notRun) => {
    const reported = info.takeReport();
    if (refundWhen?.(status)) return limiter.finish(source, reservation, undefined);
    // A handler that never ran used nothing of a cost settled later.
    if (notRun && settledCost) return limiter.finish(source, reservation, 0);
    const otherwise = reported ?? info.cost;
    if (status === 0 || actual === undefined || response === undefined) return limiter.finish(source, reservation, otherwise);
    const checked = (units: number | undefined): Promise<void> => {
      if (units !== undefined && !isUnits(units)) {
        warnings.log(
          `The cost's \`actual\` returned ${
            describeValue(units)
          } (expected a whole number from 0 to 9007199254740991, or undefined); settled ${otherwise} instead.`,
        );
      }
      return limiter.finish(source, reservation, isUnits(units) ? units : otherwise);
    };
    const failed = (error: unknown): Promise<void> => {
      warnings.log(`The cost's \`actual\` threw, and ${otherwise} was settled instead: ${String(error)}`);
      return limiter.finish(source, reservation, otherwise);
    };
    const ended: EndedResponse = { status, reported, header: (name) => headerOf(response, name) };
    try {
      const units = actual(req, ended);
      return isThenable(units) ? units.then(checked, failed) : checked(units);
    } catch (error) {
      return failed(error);
    }
  };
}
