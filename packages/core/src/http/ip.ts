/**
 * IP address parsing, canonical forms, CIDR ranges and IPv6 subnet grouping. No `node:*` import:
 * this runs unchanged on every runtime.
 */

/** A parsed address: IPv4 as one 32-bit number, IPv6 as eight 16-bit groups. */
export type ParsedIp =
  | {
    /** The family: IPv4. */
    readonly v: 4;
    /** The address as one unsigned 32-bit number. */
    readonly n: number;
    /** Canonical text, when known at parse time. */
    readonly text?: string;
  }
  | {
    /** The family: IPv6. */
    readonly v: 6;
    /** The eight 16-bit groups, most significant first. */
    readonly g: readonly number[];
  };

/** A CIDR range (or one address, as a /32 or /128). */
export interface IpRange {
  /** The family of the range. */
  readonly v: 4 | 6;
  /** The prefix length: how many leading bits an address must share with `ip`. */
  readonly bits: number;
  /** The range's base address. */
  readonly ip: ParsedIp;
}

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Dotted-quad IPv4 as one number; no leading zeros (octal to some parsers). No regex: this runs per request. */
function parseIpv4(text: string): number | undefined {
  let n = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || ++dots > 3) return undefined;
      n = n * 256 + octet;
      octet = digits = 0;
    } else if (c >= 48 && c <= 57 && !(digits > 0 && octet === 0)) {
      octet = octet * 10 + c - 48;
      if (++digits > 3 || octet > 255) return undefined;
    } else {
      return undefined;
    }
  }
  return dots === 3 && digits > 0 ? n * 256 + octet : undefined;
}

function parseIpv6(text: string): number[] | undefined {
  let body = text;
  const lastColon = body.lastIndexOf(":");
  if (lastColon !== -1 && body.includes(".", lastColon)) {
    // An embedded IPv4 tail ("::ffff:1.2.3.4") is rewritten as two hex groups.
    const v4 = parseIpv4(body.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    body = `${body.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const double = body.indexOf("::");
  if (double !== -1 && body.indexOf("::", double + 1) !== -1) return undefined;
  const readGroups = (part: string): number[] | undefined => {
    if (part === "") return [];
    const out: number[] = [];
    for (const g of part.split(":")) {
      if (!HEX_GROUP.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  if (double === -1) {
    const all = readGroups(body);
    if (all === undefined) return undefined;
    groups = all;
    if (groups.length !== 8) return undefined;
  } else {
    const head = readGroups(body.slice(0, double));
    const rest = readGroups(body.slice(double + 2));
    if (head === undefined || rest === undefined) return undefined;
    const fill = 8 - head.length - rest.length;
    if (fill < 1) return undefined;
    groups = [...head, ...new Array<number>(fill).fill(0), ...rest];
  }
  return groups;
}

/**
 * The IPv4 address an IPv6 address carries in its low 32 bits, when its upper 96 bits say it is
 * one: IPv4-mapped `::ffff:0:0/96` (dual-stack sockets), IPv4-translated `::ffff:0:0:0/96`
 * (RFC 2765), the NAT64 well-known prefix `64:ff9b::/96` (RFC 6052), and IPv4-compatible `::/96`
 * (deprecated). The last only when the embedded value is 0.1.0.0 or above: `::` and `::1` (and
 * any `::x` up to `::ffff`) are IPv6's own unspecified and loopback addresses, not 0.0.0.x, and no
 * IPv4 client has an address in 0.0.0.0/16 ("this network"). The rule reads the value, not the
 * spelling, so `::1.2.3.4` and `::102:304` are one client.
 */
function embeddedIpv4(g: readonly number[]): number | undefined {
  if (g[2] !== 0 || g[3] !== 0) return undefined;
  const low = g[6]! * 65536 + g[7]!;
  if (g[0] === 0 && g[1] === 0) {
    if (g[4] === 0 && (g[5] === 0xffff || (g[5] === 0 && g[6] !== 0))) return low;
    if (g[4] === 0xffff && g[5] === 0) return low;
  } else if (g[0] === 0x64 && g[1] === 0xff9b && g[4] === 0 && g[5] === 0) {
    return low;
  }
  return undefined;
}

/**
 * Parses an address as it appears in a socket or a proxy header: strips `[...]` brackets, a
 * port, an IPv6 zone id (`%eth0`); an IPv6 address that embeds an IPv4 one (IPv4-mapped
 * `::ffff:1.2.3.4`, NAT64 `64:ff9b::1.2.3.4`, IPv4-translated `::ffff:0:1.2.3.4`, IPv4-compatible
 * `::1.2.3.4`) is that IPv4 address, so one IPv4 client has one key however its address reaches us.
 * Returns `undefined` when the text is not an IP address.
 */
export function parseIp(input: string): ParsedIp | undefined {
  // A plain dotted quad, the usual socket address, as it is: nothing to trim, strip or unwrap.
  const plain = parseIpv4(input);
  if (plain !== undefined) return { v: 4, n: plain, text: input };
  let text = input.trim();
  if (text.length === 0 || text.length > 64) return undefined;
  if (text[0] === "[") {
    const end = text.indexOf("]");
    if (end === -1) return undefined;
    text = text.slice(1, end);
  } else if (text.indexOf(":") !== -1 && text.indexOf(":") === text.lastIndexOf(":") && text.includes(".")) {
    text = text.slice(0, text.indexOf(":")); // "1.2.3.4:5678"
  }
  const zone = text.indexOf("%");
  if (zone !== -1) text = text.slice(0, zone);
  // IPv4-mapped IPv6, as dual-stack sockets report IPv4 peers: the common case, kept short.
  const dotted = text.startsWith("::ffff:") ? text.slice(7) : text;
  const quad = parseIpv4(dotted);
  if (quad !== undefined) return { v: 4, n: quad, text: dotted };
  if (!text.includes(":")) return undefined;
  const g = parseIpv6(text);
  if (g === undefined) return undefined;
  const v4 = embeddedIpv4(g);
  return v4 === undefined ? { v: 6, g } : { v: 4, n: v4 };
}

/** The canonical text of an address: dotted IPv4, or RFC 5952 compressed lower-case IPv6. */
export function formatIp(ip: ParsedIp): string {
  if (ip.v === 4) return ip.text ?? `${ip.n >>> 24}.${(ip.n >>> 16) & 255}.${(ip.n >>> 8) & 255}.${ip.n & 255}`;
  const g = ip.g;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number): string => g.slice(from, to).map((x) => x.toString(16)).join(":");
  if (bestStart === -1) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

/** Normalises an address to its canonical text, or `undefined` when it is not an IP. */
export function normalizeIp(input: string): string | undefined {
  const ip = parseIp(input);
  return ip === undefined ? undefined : formatIp(ip);
}

/** Zeroes every bit of `ip` after the first `bits`. */
function mask(ip: ParsedIp, bits: number): ParsedIp {
  if (ip.v === 4) return { v: 4, n: bits === 0 ? 0 : (ip.n - (ip.n % 2 ** (32 - bits))) };
  const g = ip.g.map((group, i) => {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    return keep === 16 ? group : keep === 0 ? 0 : group & (0xffff << (16 - keep)) & 0xffff;
  });
  return { v: 6, g };
}

/**
 * The rate-limit identity of an address: IPv4 as is; IPv6 as its `/subnetBits` network
 * (`2001:db8:1:2::/64`), since one subscriber usually holds a whole /64 or more.
 */
export function groupIp(ip: ParsedIp, ipv6SubnetBits: number): string {
  if (ip.v === 4 || ipv6SubnetBits >= 128) return formatIp(ip);
  return `${formatIp(mask(ip, ipv6SubnetBits))}/${ipv6SubnetBits}`;
}

/** Parses `"10.0.0.0/8"`, `"2001:db8::/32"` or a single address; `undefined` when invalid. */
export function parseRange(text: string): IpRange | undefined {
  const slash = text.indexOf("/");
  const address = slash === -1 ? text : text.slice(0, slash);
  let ip = parseIp(address);
  if (ip === undefined) return undefined;
  let bits = ip.v === 4 ? 32 : 128;
  if (slash !== -1) {
    const suffix = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(suffix)) return undefined;
    bits = +suffix;
    if (ip.v === 4 && address.includes(":")) {
      // A range over IPv4-embedding IPv6 ("::ffff:10.0.0.0/104", "64:ff9b::/96") becomes its IPv4
      // equivalent; one wider than the embedding prefix stays IPv6.
      if (bits >= 96) bits -= 96;
      else {
        const g = parseIpv6(address.trim());
        if (g === undefined) return undefined;
        ip = { v: 6, g };
      }
    }
    if (bits > (ip.v === 4 ? 32 : 128)) return undefined;
  }
  return { v: ip.v, bits, ip: mask(ip, bits) };
}

/** True when `ip` lies in `range`. */
export function inRange(ip: ParsedIp, range: IpRange): boolean {
  const bits = range.bits;
  // No masked copy: this runs for every proxy range on every request.
  if (ip.v === 4) return range.v === 4 && ip.n - (ip.n % 2 ** (32 - bits)) === (range.ip as { n: number }).n;
  if (range.v !== 6) return false;
  const want = (range.ip as { g: readonly number[] }).g;
  for (let i = 0; i < 8 && i * 16 < bits; i++) {
    const keep = bits - i * 16;
    const group = keep >= 16 ? ip.g[i]! : ip.g[i]! & (0xffff << (16 - keep)) & 0xffff;
    if (group !== want[i]) return false;
  }
  return true;
}

/** True when `text` is an address or a CIDR range. */
export function isIpOrRange(text: string): boolean {
  return parseRange(text) !== undefined;
}
