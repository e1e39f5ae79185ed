// Express: RateLimitedRequest without a global augmentation; handler in both forms.
import { fixedWindow, type RateLimitInfo } from "@floodgate/core";
import { expressHandler, type ExpressRateLimitOptions, rateLimit, type RateLimitedRequest } from "@floodgate/express";
import express from "express";

const policy = fixedWindow({ limit: 10, window: "1m" });
const app = express();

// The data form: Floodgate sends what it returns.
app.use(rateLimit({ policy, handler: (req, info) => ({ status: 429, body: `${req.ip} waits ${info.retryAfterMs} ms` }) }));
// Express's own form, typed through expressHandler().
app.use(rateLimit({
  policy,
  handler: expressHandler((req, res, next, info) => {
    if (req.path === "/api") return next(new Error(`limited: ${info.remaining}`));
    res.redirect("/slow-down");
  }),
}));
// A rule's key sees Express's request.
const options: ExpressRateLimitOptions = { policy, key: (req) => req.raw.get("x-api-key") };
app.use(rateLimit(options));

app.get("/", (req, res) => {
  const info: RateLimitInfo | undefined = (req as RateLimitedRequest).rateLimit;
  res.json({ remaining: info?.remaining });
});

app.get("/plain", (req, res) => {
  // @ts-expect-error without @floodgate/express/augment, Express.Request has no rateLimit
  res.json(req.rateLimit);
});

// @ts-expect-error the data form returns { status?, headers?, body? }
rateLimit({ policy, handler: () => 429 });

// @ts-expect-error Express's form takes (req, res, next, info)
expressHandler((req: string) => req);
