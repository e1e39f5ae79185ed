/**
 * An HTTP proxy for fault injection: a real HTTP hop in front of an HTTP server (the local Upstash
 * bridge) that forwards every request as it is, or, while a fault is set, answers instead:
 *
 * - `"500"`: HTTP 500 with an Upstash-style JSON error, without forwarding (the command never runs);
 * - `"500-after-run"`: forwards, lets the command run, then answers 500 instead of its reply (a
 *   gateway failing after the fact: the charge is made, and no client can know);
 * - `"garbage"`: HTTP 200 with a body that is not JSON, without forwarding;
 * - `"slow"`: forwards at once (the command runs), and holds the reply for `delayMs`.
 *
 * It counts what it did, and the most requests it had in flight at once.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export type Fault =
  | { kind: "none" }
  | { kind: "500" }
  | { kind: "500-after-run" }
  | { kind: "garbage" }
  | { kind: "slow"; delayMs: number };

export interface FaultProxyCounts {
  /** Requests received. */
  received: number;
  /** Requests forwarded to the target (the command ran), whatever was answered. */
  forwarded: number;
  /** Answered 500 without forwarding. */
  failed: number;
  /** Forwarded, ran, and answered 500 instead of the reply: outcomes no client can know. */
  lostAfterRun: number;
  /** Answered with a garbage body without forwarding. */
  garbage: number;
  /** Forwarded, and the reply held for the fault's `delayMs`. */
  delayed: number;
  /** Requests in flight at the proxy now, and the most at once. */
  inFlight: number;
  maxInFlight: number;
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly counts: FaultProxyCounts;
  /** The fault applied to requests received from now on. */
  set(fault: Fault): void;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port in front of `target` (`http://host:port`). */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const to = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let fault: Fault = { kind: "none" };
  const counts: FaultProxyCounts = {
    received: 0,
    forwarded: 0,
    failed: 0,
    lostAfterRun: 0,
    garbage: 0,
    delayed: 0,
    inFlight: 0,
    maxInFlight: 0,
  };

  const answer = (res: http.ServerResponse, status: number, body: string | Buffer, type = "application/json"): void => {
    if (res.destroyed) return;
    res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
    res.end(body);
  };

  const server = http.createServer((req, res) => {
    const now = fault;
    counts.received++;
    counts.maxInFlight = Math.max(counts.maxInFlight, ++counts.inFlight);
    res.once("close", () => counts.inFlight--);
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("error", () => res.destroy());
    req.on("end", () => {
      if (now.kind === "500") {
        counts.failed++;
        return answer(res, 500, JSON.stringify({ error: "ERR injected: internal server error" }));
      }
      if (now.kind === "garbage") {
        counts.garbage++;
        return answer(res, 200, "<html>\u0000\u00ff not json {", "text/html");
      }
      counts.forwarded++;
      const upstream = http.request({
        host: to.hostname,
        port: to.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: to.host },
        agent,
      }, (reply) => {
        const body: Buffer[] = [];
        reply.on("data", (chunk: Buffer) => body.push(chunk));
        reply.on("error", () => res.destroy());
        reply.on("end", () => {
          const send = (): void => {
            if (now.kind === "500-after-run") {
              counts.lostAfterRun++;
              return answer(res, 500, JSON.stringify({ error: "ERR injected: internal server error after the command ran" }));
            }
            answer(res, reply.statusCode ?? 502, Buffer.concat(body), String(reply.headers["content-type"] ?? "application/json"));
          };
          if (now.kind === "slow") {
            counts.delayed++;
            setTimeout(send, now.delayMs);
          } else send();
        });
      });
      upstream.on("error", (error) => answer(res, 502, JSON.stringify({ error: `fault proxy: ${error.message}` })));
      upstream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    set(next) {
      fault = next;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}
