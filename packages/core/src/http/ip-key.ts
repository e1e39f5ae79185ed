import { describeValue, FloodgateError } from "../errors.ts";
import { groupIp, parseIp } from "./ip.ts";

/** Options of {@link ipKey}. */
export interface IpKeyOptions {
  /** The IPv6 prefix length clients are grouped by (default 64, as the middlewares' `ipv6Subnet`). */
  ipv6Subnet?: number;
}

/**
 * The key the middlewares give a client address when no `key` function does: IPv4 as is; IPv6
 * as its `/ipv6Subnet` network (`2001:db8:1:2::/64`), since one subscriber usually holds a whole
 * /64. For composite keys such as `` `${ipKey(req.ip)}:${route}` ``; an `undefined` address (no
 * client address known) is `"unknown"`, the key the middlewares count such requests under.
 *
 * @example
 * rateLimit({ policy, key: (req) => `${ipKey(req.ip, { ipv6Subnet: 56 })}:${req.header("x-tenant") ?? ""}` });
 */
export function ipKey(ip: string | undefined, options?: IpKeyOptions): string {
  const bits = options?.ipv6Subnet ?? 64;
  if (typeof bits !== "number" || !Number.isInteger(bits) || bits < 1 || bits > 128) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `ipKey(): invalid option \`ipv6Subnet\`: received ${describeValue(bits)}; expected a prefix length, a whole number from 1 to 128.`,
    );
  }
  if (ip === undefined) return "unknown";
  const parsed = typeof ip === "string" ? parseIp(ip) : undefined;
  if (parsed === undefined) {
    throw new FloodgateError(
      "INVALID_ARGUMENT",
      `ipKey(): invalid argument \`ip\`: received ${describeValue(ip)}; expected an IPv4 or IPv6 address (such as req.ip), or undefined.`,
    );
  }
  return groupIp(parsed, bits);
}
