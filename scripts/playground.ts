/**
 * `npm run playground`: builds the playground's bundle (and @floodgate/core first when its dist
 * is stale), then serves docs/ on 127.0.0.1 and prints the page's URL. PORT picks the port;
 * without it, a free one. Ctrl-C stops it.
 */
import { bundlePlayground, DOCS_DIR, ensureCoreBuilt, PLAYGROUND_PATH, serveStatic } from "./playground-build.ts";

const raw = process.env["PORT"];
const port = raw === undefined || raw === "" ? 0 : Number(raw);
if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  console.error(`PORT must be a whole number from 0 to 65535 (0 or unset: a free port); received "${raw}".`);
  process.exit(1);
}

ensureCoreBuilt();
await bundlePlayground({ write: true });
const server = await serveStatic(DOCS_DIR, port);
console.log(`Floodgate playground: ${server.url}${PLAYGROUND_PATH}`);
const stop = (): void => {
  void server.close().then(() => process.exit(0));
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
