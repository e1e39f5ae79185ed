/**
 * The address ranges platforms publish for the proxies that connect to an origin, so that a
 * preset's header is believed only from them. Written into the source from the vendors' own lists:
 * Cloudflare's https://www.cloudflare.com/ips-v4 and https://www.cloudflare.com/ips-v6, Fastly's
 * https://api.fastly.com/public-ip-list. They are not fetched at run time (core makes no request
 * of its own), so they are as current as {@link TRUST_PROXY_RANGES_AS_OF}; a platform that adds a
 * range needs a release, or `trustProxy: { preset, ranges }` in the meantime.
 */

/** The month the lists of {@link TRUST_PROXY_RANGES} were taken from the vendors' publications. */
export const TRUST_PROXY_RANGES_AS_OF = "2025-01";

/**
 * The published proxy ranges of the presets whose platforms publish them. The other presets
 * (Vercel, Netlify, Fly, Akamai) have none: their header is believed from any peer.
 */
export const TRUST_PROXY_RANGES = {
  /** Cloudflare's ranges, from https://www.cloudflare.com/ips-v4 and https://www.cloudflare.com/ips-v6. */
  cloudflare: [
    "173.245.48.0/20",
    "103.21.244.0/22",
    "103.22.200.0/22",
    "103.31.4.0/22",
    "141.101.64.0/18",
    "108.162.192.0/18",
    "190.93.240.0/20",
    "188.114.96.0/20",
    "197.234.240.0/22",
    "198.41.128.0/17",
    "162.158.0.0/15",
    "104.16.0.0/13",
    "104.24.0.0/14",
    "172.64.0.0/13",
    "131.0.72.0/22",
    "2400:cb00::/32",
    "2606:4700::/32",
    "2803:f800::/32",
    "2405:b500::/32",
    "2405:8100::/32",
    "2a06:98c0::/29",
    "2c0f:f248::/32",
  ],
  /** Fastly's ranges, from https://api.fastly.com/public-ip-list. */
  fastly: [
    "23.235.32.0/20",
    "43.249.72.0/22",
    "103.244.50.0/24",
    "103.245.222.0/23",
    "103.245.224.0/24",
    "104.156.80.0/20",
    "140.248.64.0/18",
    "140.248.128.0/17",
    "146.75.0.0/17",
    "151.101.0.0/16",
    "157.52.64.0/18",
    "167.82.0.0/17",
    "167.82.128.0/20",
    "167.82.160.0/20",
    "167.82.224.0/20",
    "172.111.64.0/18",
    "185.31.16.0/22",
    "199.27.72.0/21",
    "199.232.0.0/16",
    "2a04:4e40::/32",
    "2a04:4e42::/32",
  ],
} as const satisfies Readonly<Record<string, readonly string[]>>;
