// The calendar-window route the runtime fixtures share (workers/calendar.ts for workerd, edge/handler.ts
// for the edge runtime): `GET /calendar?now=<epoch ms>&timeZone=&period=&limit=[&billingDay=][&key=]`
// is one decision of `calendarWindow` at that instant, through `withRateLimit` over `store`, so that
// the periods are found with the runtime's own `Intl`. It answers the decision's figures, the local
// wall time of `resetAt` in the policy's zone (formatted by the runtime too), and the headers; a
// denial answers the library's 429 with its headers.
import { calendarWindow, getRateLimit, type RateLimitStore, withRateLimit } from "@floodgate/core";

export function calendarRoute(store: RateLimitStore, prefix: string): (request: Request) => Promise<Response> {
  return async (request) => {
    const q = new URL(request.url).searchParams;
    const now = Number(q.get("now"));
    const timeZone = q.get("timeZone")!;
    const billingDay = q.get("billingDay");
    const policy = calendarWindow({
      limit: Number(q.get("limit")),
      period: q.get("period") as "day" | "week" | "month",
      timeZone,
      ...(billingDay === null ? {} : { billingDay: Number(billingDay) }),
      name: "quota",
    });
    const local = new Intl.DateTimeFormat("en-CA", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    });
    const handler = withRateLimit((req: Request) => {
      const info = getRateLimit(req)!;
      return Response.json({ allowed: info.allowed, remaining: info.remaining, resetAt: info.resetAt, local: local.format(info.resetAt) });
    }, {
      policy,
      store,
      prefix: `${prefix}${timeZone}/${policy.calendar!.period}/${billingDay ?? 1}:`,
      key: () => q.get("key") ?? "k",
      clock: () => now,
    });
    return await handler(request);
  };
}
