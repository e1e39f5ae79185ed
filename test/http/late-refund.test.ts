// skipFailedRequests / skipSuccessfulRequests refund into what the request was charged in, even
// when the response ends after the window it was charged in.
import { fixedWindow, type Policy, slidingLog, withRateLimit } from "@floodgate/core";
import { describe, expect, it } from "vitest";
import { T0 } from "./support.ts";

const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 20));

/** A request whose response (a 500) is held until `finish`, while others are answered at once. */
function app(policy: Policy, clock: () => number) {
  let finish: (() => void) | undefined;
  const handler = withRateLimit(
    (request: Request) => {
      if (new URL(request.url).pathname !== "/slow") return new Response("ok");
      return new Promise<Response>((resolve) => (finish = () => resolve(new Response("failed", { status: 500 }))));
    },
    { policy, clock, skipFailedRequests: true, getClientIp: () => "127.0.0.1", warnings: false },
  );
  const send = async (path: string): Promise<number> => {
    const response = await handler(new Request(`http://localhost${path}`));
    await response.text();
    return response.status;
  };
  return { send, finish: () => finish!() };
}

describe("a refund that arrives late goes into what the request was charged in", () => {
  it("fixed window: a failure answered after the window changed gives the new window nothing", async () => {
    let now = T0 - (T0 % 60_000) + 59_000; // one second before a window ends
    const { send, finish } = app(fixedWindow({ limit: 2, window: "1m" }), () => now);
    const slow = send("/slow");
    await settle();
    now += 2_000;
    expect([await send("/"), await send("/")]).toEqual([200, 200]);
    finish();
    expect(await slow).toBe(500);
    await settle();
    expect(await send("/")).toBe(429);
  });

  it("sliding log: a late failure removes its own entry, not the newest", async () => {
    let now = T0;
    const { send, finish } = app(slidingLog({ limit: 2, window: "10s" }), () => now);
    const slow = send("/slow");
    await settle();
    now += 5_000;
    expect(await send("/")).toBe(200);
    finish();
    expect(await slow).toBe(500);
    await settle();
    expect(await send("/")).toBe(200);
    // Both admitted at +5 s are in the window until +15 s.
    now += 9_000;
    expect(await send("/")).toBe(429);
  });
});
