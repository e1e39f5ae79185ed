// examples/cloudflare-durable-objects in workerd (miniflare): bundled from the packages' dist with
// the Durable Object binding and migration read from its wrangler.jsonc; two Workers (two
// isolates) running it share each client's limit through the objects.
//   npm run build && npx vitest run test/cloudflare/example.test.ts
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import type { Miniflare } from "miniflare";
import { bundle, requireBinary, requireBuilt, requirePackage, ROOT } from "../runtimes/support.ts";

const started: Miniflare[] = [];
afterAll(async () => {
  for (const mf of started.splice(0)) await mf.dispose();
});

/** wrangler.jsonc without its comments. */
function wranglerConfig(): any {
  const text = readFileSync(join(ROOT, "examples/cloudflare-durable-objects/wrangler.jsonc"), "utf8");
  return JSON.parse(text.replace(/^\s*\/\/.*$/gm, ""));
}

it("examples/cloudflare-durable-objects: 5 per minute per client across two isolates, then 429", async () => {
  requireBinary("workerd", "miniflare");
  requireBuilt(["core", "hono", "cloudflare"]);
  const { Miniflare } = await requirePackage("miniflare", () => import("miniflare"));
  const config = wranglerConfig();
  const [binding] = config.durable_objects.bindings as { name: string; class_name: string }[];
  expect(config.migrations[0].new_sqlite_classes).toEqual([binding!.class_name]);
  const built = await bundle(join("examples/cloudflare-durable-objects", config.main), {
    format: "esm",
    conditions: ["workerd", "worker", "browser", "import", "default"],
    external: ["cloudflare:workers"],
  });
  expect(built.inputs).toContain("packages/cloudflare/dist/index.js");
  expect(built.inputs).toContain("packages/hono/dist/index.js");
  const worker = (name: string, scriptName?: string) => ({
    name,
    modules: true,
    script: built.code,
    compatibilityDate: config.compatibility_date,
    durableObjects: { [binding!.name]: { className: binding!.class_name, useSQLite: true, ...(scriptName ? { scriptName } : {}) } },
  });
  const mf = new Miniflare({ workers: [worker("main"), worker("other", "main")] });
  started.push(mf);
  await mf.ready;
  const isolates = [await mf.getWorker("main"), await mf.getWorker("other")];
  const from = { headers: { "cf-connecting-ip": "203.0.113.7" } };
  for (let i = 0; i < 5; i++) {
    const response = await isolates[i % 2]!.fetch("http://worker.test/", from);
    expect(response.status, `request ${i + 1}`).toBe(200);
    expect(response.headers.get("x-ratelimit-remaining")).toBe(String(4 - i));
    expect(await response.json()).toEqual({ hello: "worker", store: "durable-objects" });
  }
  for (const isolate of isolates) {
    const denied = await isolate.fetch("http://worker.test/", from);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("ratelimit-policy")).toBe('"5-per-1m";q=5;w=60');
    await denied.text();
  }
  const other = await isolates[1]!.fetch("http://worker.test/", { headers: { "cf-connecting-ip": "203.0.113.8" } });
  expect(other.status).toBe(200);
  await other.text();
}, 120_000);
