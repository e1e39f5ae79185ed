import { arrayOf, type Check, isBoolean, isString, objectOf, type OptionSpec, whole } from "../validation.ts";
import { formatIp, inRange, type IpRange, type ParsedIp, parseIp, parseRange } from "./ip.ts";
import { TRUST_PROXY_RANGES } from "./proxy-ranges.ts";
import type { Warnings } from "./warnings.ts";

/**
 * Platforms whose edge overwrites one header with the client's address. Where the platform
 * publishes its proxies' ranges ({@link TRUST_PROXY_RANGES}), the header is believed only from a
 * peer inside them; elsewhere from any peer, so the origin must be reachable only through the
 * platform.
 */
export const TRUST_PROXY_PRESETS = {
  /** Cloudflare (and Workers): `CF-Connecting-IP`, from a peer in Cloudflare's published ranges. */
  cloudflare: "cf-connecting-ip",
  /** Vercel: `X-Real-IP`, from any peer. */
  vercel: "x-real-ip",
  /** Netlify: `X-Nf-Client-Connection-Ip`, from any peer. */
  netlify: "x-nf-client-connection-ip",
  /** Fly.io: `Fly-Client-IP`, from any peer. */
  fly: "fly-client-ip",
  /** Fastly: `Fastly-Client-IP`, from a peer in Fastly's published ranges. */
  fastly: "fastly-client-ip",
  /** Akamai: `True-Client-IP`, from any peer. */
  akamai: "true-client-ip",
} as const;

/** A platform preset of `trustProxy`. */
export type TrustProxyPreset = keyof typeof TRUST_PROXY_PRESETS;

/**
 * A platform preset whose header is believed only from a socket peer in `ranges` (proxy IPs or
 * CIDR ranges), instead of the platform's published ranges (or any peer, where it publishes none).
 */
export interface TrustProxyPresetOptions {
  /** The platform whose client-address header to read. */
  readonly preset: TrustProxyPreset;
  /** The proxies' IPs or CIDR ranges (at least one) a peer must be in for the header to count. */
  readonly ranges?: readonly string[];
}

/**
 * Which proxies to trust: `false` (the socket address is the client), a hop count, a list of
 * proxy addresses/CIDRs, a platform preset (optionally with its proxies' ranges), or `true`
 * (trust every hop: spoofable).
 */
export type TrustProxy = boolean | number | readonly string[] | TrustProxyPreset | TrustProxyPresetOptions;

/** The `trustProxy` option's check and what it accepts, in words. Built on first use. */
export function trustProxySpec(): OptionSpec {
  const PRESETS = Object.keys(TRUST_PROXY_PRESETS);
  const isRanges: Check = arrayOf((r) => isString(r) && parseRange(r as string) !== undefined);
  const isPresetOptions = objectOf({
    preset: (v) => PRESETS.includes(v as string),
    ranges: (v) => Array.isArray(v) && v.length > 0 && isRanges(v),
  });
  const presets = PRESETS.map((p) => `"${p}"`).join(", ");
  return [
    (v) => {
      if (isBoolean(v) || whole(0, 64)(v) || PRESETS.includes(v as string)) return true;
      if (Array.isArray(v)) return isRanges(v);
      const result = isPresetOptions(v);
      // `preset` is the one required key: its absence is named as its own mistake.
      return result === true && (v as TrustProxyPresetOptions).preset === undefined ? ["preset"] : result;
    },
    `false, true, a hop count (0-64), an array of proxy IPs/CIDR ranges, a preset: ${presets}, ` +
    "or { preset, ranges } with one of those presets and a non-empty array of the proxies' IPs/CIDR ranges",
  ];
}

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
export function createClientIpResolver(trustProxy: TrustProxy, proxyHeader: ProxyHeader, warnings?: Warnings): Resolver {
  if (trustProxy === false || trustProxy === 0) return socketOnly;
  if (typeof trustProxy === "string") return presetResolver({ preset: trustProxy as TrustProxyPreset }, warnings);
  if (typeof trustProxy === "object" && !Array.isArray(trustProxy)) return presetResolver(trustProxy as TrustProxyPresetOptions, warnings);
  const chainOf = <Raw>(raw: Raw, header: HeaderReader<Raw>): string[] => {
    const value = header(raw, proxyHeader);
    if (value === undefined || value === "") return [];
    return proxyHeader === "forwarded" ? parseForwarded(value) : splitList(value);
  };
  let trusts: (ip: ParsedIp, hop: number) => boolean;
  if (trustProxy === true) trusts = () => true;
  else if (typeof trustProxy === "number") trusts = (_ip, hop) => hop < trustProxy;
  else {
    const ranges = parseRanges(trustProxy as readonly string[]);
    trusts = (ip) => inAny(ip, ranges);
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

function parseRanges(texts: readonly string[]): IpRange[] {
  return texts.map((t) => parseRange(t)!);
}

function inAny(ip: ParsedIp, ranges: readonly IpRange[]): boolean {
  for (let i = 0; i < ranges.length; i++) if (inRange(ip, ranges[i]!)) return true;
  return false;
}

/**
 * A preset reads one header the platform overwrites. Its ranges (the user's, else the platform's
 * published ones) say which socket peers are the platform: the header of any other peer is the
 * client's own writing, and the peer is the client. With no socket address (Workers, edge
 * functions: the platform is the runtime, no peer to check) the header is believed.
 */
function presetResolver({ preset, ranges: own }: TrustProxyPresetOptions, warnings: Warnings | undefined): Resolver {
  const name = TRUST_PROXY_PRESETS[preset];
  const published = (TRUST_PROXY_RANGES as Partial<Record<TrustProxyPreset, readonly string[]>>)[preset];
  const texts = own ?? published;
  const ranges = texts === undefined ? undefined : parseRanges(texts);
  if (ranges === undefined) warnings?.emit("presetWithoutRanges", `trustProxy "${preset}" reads ${name}`);
  return (socketIp, raw, header) => {
    const value = header(raw, name);
    if (value === undefined) return socketOnly(socketIp);
    if (ranges !== undefined && socketIp !== undefined) {
      const peer = parseIp(socketIp);
      if (peer === undefined) return { ip: undefined, invalid: socketIp };
      if (!inAny(peer, ranges)) {
        // A runtime that reports the header's value as the peer (Hono's getConnInfo on Workers) forges nothing.
        if (warnings?.pending("untrustedPresetPeer") && formatIp(peer) !== normalizeOrSelf(value)) {
          warnings.emit(
            "untrustedPresetPeer",
            `${name} from ${formatIp(peer)}, outside the ${own === undefined ? `published ${preset}` : "given"} ranges`,
          );
        }
        return { ip: peer };
      }
    }
    const ip = parseIp(value);
    return ip === undefined ? { ip: socketIp === undefined ? undefined : parseIp(socketIp), invalid: value } : { ip };
  };
}

function normalizeOrSelf(text: string): string {
  const ip = parseIp(text);
  return ip === undefined ? text : formatIp(ip);
}
