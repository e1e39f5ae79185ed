import { inRange, parseIp, parseRange, type IpRange, type ParsedIp } from "./ip.ts";

/**
 * Platforms whose edge overwrites one header with the client's address, so that header can be
 * trusted as is (when the origin is reachable only through the platform).
 */
export const TRUST_PROXY_PRESETS = {
  cloudflare: "cf-connecting-ip",
  vercel: "x-real-ip",
  netlify: "x-nf-client-connection-ip",
  fly: "fly-client-ip",
  fastly: "fastly-client-ip",
  akamai: "true-client-ip",
} as const;

/** A platform preset of `trustProxy`. */
export type TrustProxyPreset = keyof typeof TRUST_PROXY_PRESETS;

/**
 * Which proxies to trust: `false` (the socket address is the client), a hop count, a list of
 * proxy addresses/CIDRs, a platform preset, or `true` (trust every hop: spoofable).
 */
export type TrustProxy = boolean | number | readonly string[] | TrustProxyPreset;

/** The header a proxy chain is read from. */
export type ProxyHeader = "x-forwarded-for" | "forwarded";

/** What resolving the client address found. */
export interface ClientIp {
  /** The client's address, or `undefined` when none could be found. */
  readonly ip: ParsedIp | undefined;
  /** Set when an entry that should have been an address was not one. */
  readonly invalid?: string;
}

/** Reads a header of the framework's request object (given once, so no closure per request). */
export type HeaderReader<Raw> = (raw: Raw, name: string) => string | undefined;

type Resolver = <Raw>(socketIp: string | undefined, raw: Raw, header: HeaderReader<Raw>) => ClientIp;

/** Extracts the `for=` values of a `Forwarded` header (RFC 7239), left to right. */
export function parseForwarded(value: string): string[] {
  const out: string[] = [];
  for (const element of value.split(",")) {
    let found = "";
    for (const pair of element.split(";")) {
      const eq = pair.indexOf("=");
      if (eq === -1 || pair.slice(0, eq).trim().toLowerCase() !== "for") continue;
      let v = pair.slice(eq + 1).trim();
      if (v.length >= 2 && v[0] === '"' && v[v.length - 1] === '"') v = v.slice(1, -1).replace(/\\(.)/g, "$1");
      found = v;
    }
    out.push(found);
  }
  return out;
}

function splitList(value: string): string[] {
  return value.split(",").map((s) => s.trim());
}

/**
 * Builds the client-address resolver for a `trustProxy` setting, once. The chain is read from
 * the right (the socket, then the nearest proxy's entry...), and trusted only as far as configured,
 * so a client cannot choose its own key by sending a forged header.
 */
export function createClientIpResolver(trustProxy: TrustProxy, proxyHeader: ProxyHeader): Resolver {
  if (trustProxy === false || trustProxy === 0) return socketOnly;
  if (typeof trustProxy === "string") {
    const name = TRUST_PROXY_PRESETS[trustProxy as TrustProxyPreset];
    return (socketIp, raw, header) => {
      const value = header(raw, name);
      if (value === undefined) return socketOnly(socketIp);
      const ip = parseIp(value);
      return ip === undefined ? { ip: socketIp === undefined ? undefined : parseIp(socketIp), invalid: value } : { ip };
    };
  }
  const chainOf = <Raw>(raw: Raw, header: HeaderReader<Raw>): string[] => {
    const value = header(raw, proxyHeader);
    if (value === undefined || value === "") return [];
    return proxyHeader === "forwarded" ? parseForwarded(value) : splitList(value);
  };
  let trusts: (ip: ParsedIp, hop: number) => boolean;
  if (trustProxy === true) trusts = () => true;
  else if (typeof trustProxy === "number") trusts = (_ip, hop) => hop < trustProxy;
  else {
    const ranges = (trustProxy as readonly string[]).map((t) => parseRange(t)!) as IpRange[];
    trusts = (ip) => ranges.some((r) => inRange(ip, r));
  }
  return (socketIp, raw, header) => {
    // hop 0 is the socket peer; hop i the i-th entry from the right of the chain.
    let current = socketIp === undefined ? undefined : parseIp(socketIp);
    if (current === undefined) return { ip: undefined, invalid: socketIp };
    const chain = chainOf(raw, header);
    for (let hop = 0, i = chain.length - 1; i >= 0; hop++, i--) {
      if (!trusts(current, hop)) return { ip: current };
      const next = parseIp(chain[i]!);
      // A trusted proxy writes a valid address; anything else came from the client, and keying by
      // it would let the client rotate keys. Key by the proxy that passed it on instead.
      if (next === undefined) return { ip: current, invalid: chain[i] };
      current = next;
    }
    return { ip: current };
  };
}

function socketOnly(socketIp: string | undefined): ClientIp {
  if (socketIp === undefined) return { ip: undefined };
  const ip = parseIp(socketIp);
  return ip === undefined ? { ip: undefined, invalid: socketIp } : { ip };
}
