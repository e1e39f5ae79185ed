// A stand-in for an LLM provider, for the gateway example and its test: an OpenAI-style
// `POST /v1/chat/completions` that streams Server-Sent Events, one word per event, each with the
// usage so far (`usage.total_tokens`: prompt tokens + words sent), then `data: [DONE]`.
//   x-fake-fail: before     answers 500 before streaming anything
//   x-fake-fail: midstream  sends two events, then breaks the connection
// It records, per request, the usage it last sent: what a provider would bill.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** What the fake provider has billed one request. */
export interface Billed {
  /** The `usage.total_tokens` of the last event sent (0 when nothing was sent). */
  totalTokens: number;
  /** How the stream ended: completed, the client went away, or the provider failed. */
  outcome: "completed" | "client-closed" | "failed";
}

export interface FakeLlm {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Every request so far, in arrival order. */
  readonly billed: Billed[];
  close(): Promise<void>;
}

/** Tokens a prompt counts: one per word of its messages. */
export function promptTokens(messages: readonly { content?: unknown }[]): number {
  let n = 0;
  for (const m of messages) n += String(m.content ?? "").split(/\s+/).filter(Boolean).length;
  return n;
}

/**
 * Starts the fake provider on 127.0.0.1 (`port` 0: one the kernel picks). Words come every
 * `gapMs` (default 100).
 */
export async function startFakeLlm({ port = 0, gapMs = 100 }: { port?: number; gapMs?: number } = {}): Promise<FakeLlm> {
  const billed: Billed[] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(text || "{}") as { messages?: { content?: unknown }[]; max_tokens?: number };
      const record: Billed = { totalTokens: 0, outcome: "completed" };
      billed.push(record);
      const fail = req.headers["x-fake-fail"];
      if (fail === "before") {
        record.outcome = "failed";
        res.writeHead(500, { "content-type": "application/json" }).end('{"error":{"message":"the model is overloaded"}}');
        return;
      }
      const prompt = promptTokens(body.messages ?? []);
      const words = Math.max(1, Math.min(body.max_tokens ?? 16, 256));
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let sent = 0;
      let timer: ReturnType<typeof setTimeout> | undefined;
      res.on("close", () => {
        clearTimeout(timer);
        if (!res.writableFinished && record.outcome === "completed") record.outcome = "client-closed";
      });
      const send = (): void => {
        if (fail === "midstream" && sent === 2) {
          record.outcome = "failed";
          res.destroy();
          return;
        }
        sent++;
        const usage = { prompt_tokens: prompt, completion_tokens: sent, total_tokens: prompt + sent };
        const event = { object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: `word${sent} ` } }], usage };
        res.write(`data: ${JSON.stringify(event)}\n\n`);
        record.totalTokens = usage.total_tokens;
        if (sent < words) timer = setTimeout(send, gapMs);
        else res.end("data: [DONE]\n\n");
      };
      send();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    billed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
