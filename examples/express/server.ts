// Express: limits mounted on /api/, rules matched against the full path.
//   npx tsx examples/express/server.ts
import { slidingWindow, tokenBucket } from "@floodgate/core";
import { rateLimit, type RateLimitedRequest } from "@floodgate/express";
import express from "express";

const app = express();
// Behind one reverse proxy? `app.set("trust proxy", 1)`: Floodgate follows the app's setting.
app.use(
  "/api/",
  rateLimit({
    rules: {
      "POST /api/login": slidingWindow({ limit: 5, window: "1m", name: "login" }),
      default: tokenBucket({ capacity: 100, refillRate: 20, name: "api" }),
    },
  }),
);
app.post("/api/login", (_req, res) => {
  res.json({ token: "demo" });
});
app.get("/api/hello", (req, res) => {
  res.json({ hello: "world", remaining: (req as RateLimitedRequest).rateLimit?.remaining });
});

const port = Number(process.env.PORT ?? 3001);
const server = app.listen(port, "127.0.0.1", () => {
  const address = server.address();
  const actual = typeof address === "object" && address !== null ? address.port : port;
  console.log(`Express example listening on http://127.0.0.1:${actual}`);
  console.log(`Try: for i in $(seq 1 6); do curl -s -o /dev/null -w "%{http_code}\\n" -X POST http://127.0.0.1:${actual}/api/login; done`);
});
