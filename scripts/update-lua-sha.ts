/**
 * Rewrites the precomputed SHA1 constants in packages/core/src/stores/redis/lua.ts after a script
 * changed or a kind was added to the algorithm registry: `npx tsx scripts/update-lua-sha.ts`.
 * (test/redis/lua-sha.test.ts fails until then.)
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { luaScripts } from "../packages/core/src/stores/redis/lua.ts";

const file = fileURLToPath(new URL("../packages/core/src/stores/redis/lua.ts", import.meta.url));
let text = readFileSync(file, "utf8");
for (const [name, script] of Object.entries(luaScripts())) {
  const sha = createHash("sha1").update(script.source).digest("hex");
  const key = name.includes("-") ? `"${name}"` : name;
  const line = new RegExp(`(\\n  ${key}: ")[0-9a-f]{40}(",)`);
  // A new kind's line goes before the multi-policy script's.
  text = line.test(text) ? text.replace(line, `$1${sha}$2`) : text.replace(/(\n {2}multi: "[0-9a-f]{40}",)/, `\n  ${key}: "${sha}",$1`);
  console.log(name, sha);
}
writeFileSync(file, text);
