/**
 * Rewrites the precomputed SHA1 constants of the Redis scripts after a script changed or a kind
 * was added to the algorithm registry: `npx tsx scripts/update-lua-sha.ts`. The constants live
 * beside their scripts: packages/core/src/stores/redis/lua.ts (decisions, penalties and blocks),
 * reservation-lua.ts (reserve and settle), lease-lua.ts (leases) and compound-lua.ts (compound steps). test/redis/lua-sha.test.ts fails
 * until they match.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { luaScripts } from "../packages/core/src/stores/redis/lua.ts";
import { reservationScripts } from "../packages/core/src/stores/redis/reservation-lua.ts";
import { leaseLuaScript } from "../packages/core/src/stores/redis/lease-lua.ts";
import { compoundLua } from "../packages/core/src/stores/redis/compound-lua.ts";

const sha1 = (source: string): string => createHash("sha1").update(source).digest("hex");
const edit = (name: string, change: (text: string) => string): void => {
  const file = fileURLToPath(new URL(`../packages/core/src/stores/redis/${name}`, import.meta.url));
  writeFileSync(file, change(readFileSync(file, "utf8")));
};

edit("lua.ts", (text) => {
  for (const [name, script] of Object.entries(luaScripts())) {
    const sha = sha1(script.source);
    const key = name.includes("-") ? `"${name}"` : name;
    const line = new RegExp(`(\\n  ${key}: ")[0-9a-f]{40}(",)`);
    // A new kind's line goes before the multi-policy script's.
    text = line.test(text) ? text.replace(line, `$1${sha}$2`) : text.replace(/(\n {2}multi: "[0-9a-f]{40}",)/, `\n  ${key}: "${sha}",$1`);
    console.log(name, sha);
  }
  return text;
});
edit("reservation-lua.ts", (text) => {
  for (const [name, script] of Object.entries(reservationScripts())) {
    const sha = sha1(script.source);
    text = text.replace(new RegExp(`(\\n  ${name}: ")[0-9a-f]{40}(",)`), `$1${sha}$2`);
    console.log(name, sha);
  }
  return text;
});
edit("lease-lua.ts", (text) => {
  const sha = sha1(leaseLuaScript().source);
  console.log("lease", sha);
  return text.replace(/(export const LEASE_SCRIPT_SHA = ")[0-9a-f]{40}(";)/, `$1${sha}$2`);
});
edit("compound-lua.ts", (text) => {
  const sha = sha1(compoundLua().source);
  console.log("compound", sha);
  return text.replace(/(export const COMPOUND_SCRIPT_SHA = ")[0-9a-f]{40}(";)/, `$1${sha}$2`);
});
