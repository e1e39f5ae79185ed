/**
 * The playground's compound panel: requests of users in organisations through `withRateLimit`
 * with a rule over three dimensions (the user AND the organisation AND the whole service), as an
 * app would write it. Every request's outcome, the dimension that bound and every dimension's
 * units left are the HTTP layer's own, on a clock that does not move (one minute's window).
 */
import { dimensions, fixedWindow, type RateLimitInfo, withRateLimit } from "@floodgate/core";

/** Each dimension's limit per minute. */
export interface CompoundLimits {
  readonly user: number;
  readonly org: number;
  readonly global: number;
}

/** One request: who sent it, what it got, which dimension bound, and every dimension's units left. */
export interface CompoundRow {
  readonly user: string;
  readonly org: string;
  readonly status: number;
  readonly dimension: string;
  readonly left: { readonly user: number; readonly org: number; readonly global: number };
  /** The `RateLimit` header the response carried. */
  readonly header: string;
}

export const DEFAULT_LIMITS: CompoundLimits = { user: 3, org: 5, global: 8 };
export const DEFAULT_REQUESTS = "alice@acme ×4, bob@acme ×3, carol@globex ×3, dave@initech ×2";

/** `"alice@acme ×4, bob@acme"` as one `user@org` per request; an error names what it cannot read. */
export function parseRequests(text: string): { user: string; org: string }[] {
  const out: { user: string; org: string }[] = [];
  for (const part of text.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const match = /^([\w.-]+)@([\w.-]+)(?:\s*[×x]\s*(\d+))?$/.exec(part);
    if (match === null) throw new Error(`"${part}" is not user@org, optionally followed by ×count`);
    const count = match[3] === undefined ? 1 : Number(match[3]);
    if (count < 1 || count > 100) throw new Error(`"${part}": a count from 1 to 100`);
    for (let i = 0; i < count; i++) out.push({ user: match[1]!, org: match[2]! });
  }
  if (out.length > 200) throw new Error("at most 200 requests");
  return out;
}

/** Sends `requests` in order through one fresh middleware with `limits`. */
export async function compoundRun(limits: CompoundLimits, requests: readonly { user: string; org: string }[]): Promise<CompoundRow[]> {
  const perMinute = (limit: number) => fixedWindow({ limit, window: "1m" });
  let info: RateLimitInfo | undefined;
  const handler = withRateLimit(() => new Response("ok"), {
    clock: () => Date.UTC(2026, 0, 1),
    getClientIp: () => "192.0.2.1",
    headers: "draft-11",
    onDecision: (i) => {
      info = i;
    },
    rules: {
      default: {
        dimensions: dimensions({
          user: { key: (req) => req.header("x-user"), policy: perMinute(limits.user) },
          org: { key: (req) => req.header("x-org"), policy: perMinute(limits.org) },
          global: { key: () => "all", policy: perMinute(limits.global) },
        }),
      },
    },
  });
  const rows: CompoundRow[] = [];
  for (const { user, org } of requests) {
    const response = await handler(new Request("https://example.com/", { headers: { "x-user": user, "x-org": org } }));
    const d = info!.dimensions!;
    rows.push({
      user,
      org,
      status: response.status,
      dimension: info!.dimension!,
      left: { user: d["user"]!.remaining, org: d["org"]!.remaining, global: d["global"]!.remaining },
      header: response.headers.get("ratelimit") ?? "",
    });
  }
  return rows;
}
