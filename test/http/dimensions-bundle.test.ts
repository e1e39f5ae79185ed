// An app without `dimensions` bundles none of the compound code: esbuild bundles a Hono app
// with and without it (packages from source, through the root tsconfig's paths); the inputs of
// the first name no file of the compound limiter or of the HTTP layer's dimensions, and the
// second, bundled and run, decides over two keys.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { build, type Metafile } from "esbuild";
import { afterAll, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const OUT = mkdtempSync(path.join(ROOT, "node_modules", ".dims-bundle-"));
afterAll(() => rmSync(OUT, { recursive: true, force: true }));

/**
 * `dist`: from the packages' built output (as scripts/size.mjs measures it: `npm run build`
 * first), whose shared chunks keep whatever a module does at its top level; else from source.
 */
async function bundle(source: string, dist = false): Promise<{ inputs: string[]; code: string; gzip: number }> {
  const result = await build({
    stdin: { contents: source, resolveDir: ROOT, loader: "ts" },
    absWorkingDir: ROOT,
    bundle: true,
    minify: true,
    write: false,
    metafile: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["import"],
    target: "es2022",
    ...(dist ? { tsconfigRaw: "{}" } : { tsconfig: path.join(ROOT, "tsconfig.json") }),
    external: ["hono", "hono/*"],
    logLevel: "silent",
  });
  const code = result.outputFiles[0]!.text;
  // The files with bytes in the output (the metafile's inputs also list what was parsed, then shaken off).
  const output = Object.values((result.metafile as Metafile).outputs)[0]!;
  const inputs = Object.entries(output.inputs).filter(([, i]) => i.bytesInOutput > 0).map(([name]) => name);
  return { inputs, code, gzip: gzipSync(code, { level: 9 }).length };
}

const APP = `
import { Hono } from "hono";
import { IMPORTS } from "@floodgate/core";
import { rateLimit } from "@floodgate/hono";
export const app = new Hono();
app.use(rateLimit({ getConnInfo: () => ({ remote: { address: "127.0.0.1" } }), OPTIONS }));
app.get("*", (c) => c.json({ dimension: c.get("rateLimit")?.dimension ?? null }));
`;
const WITHOUT = APP.replace("IMPORTS", "slidingWindow").replace("OPTIONS", `policy: slidingWindow({ limit: 100, window: "1m" })`);
const WITH = APP.replace("IMPORTS", "dimensions, fixedWindow").replace(
  "OPTIONS",
  `rules: { default: { dimensions: dimensions({
    user: { key: (req) => req.header("x-user"), policy: fixedWindow({ limit: 2, window: "1m" }) },
    org: { key: (req) => req.header("x-org"), policy: fixedWindow({ limit: 3, window: "1m" }) },
  }) } }`,
);
const compoundCode = (inputs: string[]) => inputs.filter((i) => /core\/src\/(compound|http\/dimensions)\//.test(i));

it("an app without dimensions bundles none of the compound code", async () => {
  const without = await bundle(WITHOUT);
  expect(without.inputs.some((i) => i.includes("packages/hono/src"))).toBe(true);
  expect(compoundCode(without.inputs)).toEqual([]);
  expect(without.code).not.toContain("createCompoundLimiter");
  const withIt = await bundle(WITH);
  expect(compoundCode(withIt.inputs).length).toBeGreaterThanOrEqual(5);
  // What an app that uses it adds: the compound limiter and the rule's counter, headers and info.
  expect(withIt.gzip - without.gzip).toBeGreaterThan(2_000);
});

it("from the built packages too, an app without dimensions has none of their code", async () => {
  // Texts only the compound limiter and the rule's dimensions have.
  const marks = ["createCompoundLimiter()", "counts over dimensions"];
  const without = await bundle(WITHOUT, true);
  for (const mark of marks) expect(without.code).not.toContain(mark);
  const withIt = await bundle(WITH, true);
  for (const mark of marks) expect(withIt.code).toContain(mark);
});

it("an app with dimensions, bundled, decides over every dimension", async () => {
  const file = path.join(OUT, "app.mjs");
  writeFileSync(file, (await bundle(WITH)).code);
  const { app } = await import(pathToFileURL(file).href);
  const send = async (user: string) => {
    const response = await app.request("/x", { headers: { "x-user": user, "x-org": "acme" } });
    // The headers' seconds (\`t\`) count down the real clock's minute: left out.
    const items = response.headers.get("ratelimit")!.replace(/;t=\d+/g, "");
    return [response.status, response.status === 200 ? (await response.json()).dimension : items];
  };
  expect(await send("u1")).toEqual([200, "user"]);
  expect(await send("u1")).toEqual([200, "user"]);
  expect(await send("u1")).toEqual([429, '"user";r=0, "org";r=1']);
  expect(await send("u2")).toEqual([200, "org"]);
  expect(await send("u2")).toEqual([429, '"user";r=1, "org";r=0']);
});
