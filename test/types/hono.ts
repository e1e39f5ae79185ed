// Hono: key(req), cost(req), skip(req) see the app's own Env; c.get("rateLimit") is typed after the middleware.
import { dimensions, fixedWindow, type RateLimitInfo } from "@floodgate/core";
import { type HonoRateLimitOptions, rateLimit, type RateLimitEnv } from "@floodgate/hono";
import { Hono } from "hono";

type AppEnv = { Variables: { user: { id: string; plan: "free" | "pro" } | undefined } };
const policy = fixedWindow({ limit: 10, window: "1m" });

// Chained after the middleware, routes see its variable as well as the app's.
new Hono<AppEnv>().use(
  rateLimit<AppEnv>({
    policy,
    key: (req) => req.raw.get("user")?.id,
    cost: (req) => (req.raw.get("user")?.plan === "pro" ? 1 : 2),
    skip: (req) => req.raw.get("user")?.plan === "pro" && req.path === "/health",
    // @ts-expect-error the app's variables are typed: there is no "account"
    onLimited: (_info, req) => req.raw.get("account"),
  }),
).get("/", (c) => {
  const info: RateLimitInfo | undefined = c.get("rateLimit");
  return c.json({ remaining: info?.remaining, source: info?.source });
});

// Declared on the app instead: the middleware's variable is typed in every route.
const declared = new Hono<RateLimitEnv>();
declared.get("/", (c) => c.text(String(c.get("rateLimit").limit)));

// Options typed with the app's Env, given separately.
const options: HonoRateLimitOptions<AppEnv> = { policy, key: (req) => req.raw.get("user")?.id };
rateLimit(options);

// Without the Env, the variables are unknown to the key function.
// @ts-expect-error `user` is not a variable of the default Env
rateLimit({ policy, key: (req) => req.raw.get("user").id });

// @ts-expect-error a key function returns a string or undefined
rateLimit<AppEnv>({ policy, key: (req) => req.raw.get("user") });

// @ts-expect-error source is one of the known sources
const wrong: RateLimitInfo["source"] = "redis";
void wrong;

// A rule's dimensions: each dimension's key, its figures on the info, the binding one named.
const quotas = dimensions({
  user: { key: (req) => req.header("x-user"), policy },
  org: { key: () => "acme", policy: [policy] },
});
new Hono().use(rateLimit({ rules: { default: { dimensions: quotas } } })).get("/", (c) => {
  const info = c.get("rateLimit");
  const orgLeft: number | undefined = info.dimensions?.["org"]?.remaining;
  const binding: string | undefined = info.dimension;
  return c.json({ orgLeft, binding });
});
void quotas.limiter().dimensions.user.reset("u1");

// @ts-expect-error the limiter's dimensions are the value's: there is no "ip"
void quotas.limiter().dimensions.ip;

// @ts-expect-error a dimension's key returns a string or undefined
dimensions({ user: { key: () => 42, policy } });

// @ts-expect-error a rule's dimensions come from dimensions(), not a plain object
rateLimit({ rules: { default: { dimensions: { user: { policy } } } } });
