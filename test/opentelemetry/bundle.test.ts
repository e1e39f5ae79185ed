// An app without the instrumentation bundles none of it: esbuild bundles a Hono app with and
// without @floodgate/opentelemetry (packages from source, through the root tsconfig's paths), and
// the inputs of the first name no OpenTelemetry file, while the second pulls in the package and
// @opentelemetry/api.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Metafile } from "esbuild";
import { expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

async function inputsOf(source: string): Promise<{ inputs: string[]; code: string }> {
  const result = await build({
    stdin: { contents: source, resolveDir: ROOT, loader: "ts" },
    absWorkingDir: ROOT,
    bundle: true,
    write: false,
    metafile: true,
    format: "esm",
    platform: "node",
    target: "es2022",
    tsconfig: path.join(ROOT, "tsconfig.json"),
    external: ["hono", "hono/*"],
    logLevel: "silent",
  });
  return { inputs: Object.keys((result.metafile as Metafile).inputs), code: result.outputFiles[0]!.text };
}

const APP = `
import { slidingWindow } from "@floodgate/core";
import { rateLimit } from "@floodgate/hono";
export const limiter = rateLimit(OPTIONS);
`;

it("an app without @floodgate/opentelemetry bundles none of it, nor @opentelemetry/api", async () => {
  const { inputs, code } = await inputsOf(APP.replace("OPTIONS", `{ policy: slidingWindow({ limit: 10, window: "1m" }) }`));
  expect(inputs.some((i) => i.includes("packages/hono/src"))).toBe(true);
  expect(inputs.filter((i) => i.includes("opentelemetry"))).toEqual([]);
  expect(code).not.toContain("floodgate.decisions");
});

it("an app with it bundles the package and the API", async () => {
  const source = `import { floodgateTelemetry } from "@floodgate/opentelemetry";\n${
    APP.replace("OPTIONS", `floodgateTelemetry().instrument({ policy: slidingWindow({ limit: 10, window: "1m" }) })`)
  }`;
  const { inputs, code } = await inputsOf(source);
  expect(inputs.some((i) => i.includes("packages/opentelemetry/src"))).toBe(true);
  expect(inputs.some((i) => i.includes("node_modules/@opentelemetry/api"))).toBe(true);
  expect(code).toContain("floodgate.decisions");
});
