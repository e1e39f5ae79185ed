// Serves a handler module of this folder over HTTP with lambda-local, which turns each request
// into an HTTP API (payload 2.0) event and the handler's result into the response:
//   npx tsx examples/aws-lambda/invoke-local.ts examples/aws-lambda/dynamodb.ts
// Prints "listening on http://127.0.0.1:PORT" (PORT: $PORT, else a free one).
import { createServer } from "node:net";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import lambdaLocal from "lambda-local";

const file = process.argv[2];
if (file === undefined) throw new Error("usage: invoke-local.ts <handler module>");
const module = await import(pathToFileURL(resolve(file)).href) as Record<string, unknown>;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

const port = Number(process.env["PORT"]) || await freePort();
lambdaLocal.setLogger({ log: () => undefined, transports: [] });
// One module for every request: a warm instance, its module scope (limiter, store) kept.
lambdaLocal.watch({ lambdaFunc: module, lambdaHandler: "handler", port, verboseLevel: 0, timeoutMs: 10_000 });
console.log(`listening on http://127.0.0.1:${port}`);
