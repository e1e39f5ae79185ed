// With `import "@floodgate/express/augment"`, every Express request has a typed rateLimit.
import "@floodgate/express/augment";
import { fixedWindow, type RateLimitInfo } from "@floodgate/core";
import { rateLimit } from "@floodgate/express";
import express from "express";

const app = express();
app.use(rateLimit({ policy: fixedWindow({ limit: 10, window: "1m" }) }));
app.get("/", (req, res) => {
  const info: RateLimitInfo | undefined = req.rateLimit;
  res.json({ remaining: info?.remaining, source: info?.source });
});
app.get("/strict", (req, res) => {
  // @ts-expect-error absent when the request was skipped: possibly undefined
  res.json(req.rateLimit.remaining);
});
