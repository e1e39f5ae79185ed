// Koa: ctx.state.rateLimit typed when the app is new Koa<RateLimitState>(); key(req) sees the app's state.
import { fixedWindow } from "@floodgate/core";
import { rateLimit, type RateLimitError, type RateLimitState } from "@floodgate/koa";
import Koa from "koa";

interface AppState extends RateLimitState {
  user?: { id: string };
}
const policy = fixedWindow({ limit: 10, window: "1m" });

const app = new Koa<AppState>();
app.use(rateLimit<AppState>({ policy, key: (req) => req.raw.state.user?.id, throw: true }));
app.use((ctx) => {
  const remaining: number | undefined = ctx.state.rateLimit?.remaining;
  ctx.body = { remaining, source: ctx.state.rateLimit?.source };
});

// The error throw: true throws, as the app's error middleware reads it.
app.use(async (ctx, next) => {
  try {
    await next();
  } catch (error) {
    const limited = error as Partial<RateLimitError>;
    if (limited.rateLimit !== undefined) ctx.body = { retryAfterMs: limited.rateLimit.retryAfterMs };
  }
});

// With the state declared by RateLimitState alone.
const plain = new Koa<RateLimitState>();
plain.use(rateLimit({ policy }));
plain.use((ctx) => {
  ctx.body = ctx.state.rateLimit?.limit;
});

// @ts-expect-error throw is a boolean
rateLimit({ policy, throw: "yes" });

// @ts-expect-error the state has no `account`
rateLimit<AppState>({ policy, key: (req) => req.raw.state.account.id });

const strict = new Koa<{ user: string }>();
strict.use((ctx) => {
  // @ts-expect-error without RateLimitState, the state has no rateLimit
  ctx.body = ctx.state.rateLimit;
});
