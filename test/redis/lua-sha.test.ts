import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { luaScripts, SCRIPT_SHA } from "../../packages/core/src/stores/redis/lua.ts";
import { RESERVATION_SCRIPT_SHA, reservationScripts } from "../../packages/core/src/stores/redis/reservation-lua.ts";
import { COMPOUND_SCRIPT_SHA, compoundLua } from "../../packages/core/src/stores/redis/compound-lua.ts";

/** Every script the Redis stores send. */
const ALL_SCRIPTS = () => [...Object.values(luaScripts()), ...Object.values(reservationScripts()), compoundLua()];

describe("Lua scripts", () => {
  it("precomputed SHA1 constants match the script sources (run `npx tsx scripts/update-lua-sha.ts` after editing a script)", () => {
    const actual = Object.fromEntries(
      Object.entries(luaScripts()).map(([name, s]) => [name, createHash("sha1").update(s.source).digest("hex")]),
    );
    expect(actual).toEqual(SCRIPT_SHA);
    for (const s of Object.values(luaScripts())) expect(s.sha).toBe(createHash("sha1").update(s.source).digest("hex"));
  });

  it("precomputed SHA1 constants of the reservation scripts match their sources (stores/redis/reservation-lua.ts)", () => {
    const actual = Object.fromEntries(
      Object.entries(reservationScripts()).map(([name, s]) => [name, createHash("sha1").update(s.source).digest("hex")]),
    );
    expect(actual).toEqual(RESERVATION_SCRIPT_SHA);
  });

  it("precomputed SHA1 of the compound script matches its source (stores/redis/compound-lua.ts)", () => {
    expect(createHash("sha1").update(compoundLua().source).digest("hex")).toBe(COMPOUND_SCRIPT_SHA);
  });

  it("use no shebang flags and no command vanilla Redis 7 / Valkey lacks", () => {
    const allowed = new Set([
      "GET",
      "SET",
      "INCRBY",
      "TIME",
      "EXISTS",
      "LINDEX",
      "LLEN",
      "LPOP",
      "RPUSH",
      "LTRIM",
      "LREM",
      "LINSERT",
      "PEXPIRE",
      "PTTL",
      "DEL",
    ]);
    for (const s of ALL_SCRIPTS()) {
      expect(s.source).not.toMatch(/^\s*#!/);
      for (const [, command] of s.source.matchAll(/redis\.p?call\("([A-Z]+)"/g)) expect(allowed).toContain(command);
      expect(s.source).not.toMatch(/redis\.setresp|redis\.set_repl|redis\.replicate_commands/);
    }
  });

  it("pass redis.call only strings (a Lua number argument is printed inexactly by some Redis 7 versions, e.g. 1e+08)", () => {
    // Every argument is a string literal, a key, a string variable or argument, a concatenation of strings, or fmt("%d", ...);
    // or the sliding window's first step's state, two strings it read around a count its script
    // keeps below 1e14 for that form (Lua's own tostring is exact up to 14 digits).
    const allowed =
      /^(?:"[^"]*"|k|bk|v|fv|KEYS\[[^\]]+\] \.\. ":b"|KEYS\[[^\]]+\]|ARGV\[[^\]]+\]|table\.concat\(rec, ":"\)|(?:fmt|string\.format)\(.*\)|unpack\(batch\)|cost == 1 and "\d+" or (?:fmt|string\.format)\(.*\)|ti \.\. ":" \.\. n \.\. ":" \.\. sp)$/;
    let calls = 0;
    for (const s of ALL_SCRIPTS()) {
      for (const [, list] of s.source.matchAll(/redis\.p?call\(([^\n]*)\)/g)) {
        calls++;
        const args: string[] = [];
        let depth = 0;
        let current = "";
        for (const ch of list!.slice(0, closing(list!))) {
          if (ch === "," && depth === 0) {
            args.push(current.trim());
            current = "";
            continue;
          }
          if (ch === "(") depth++;
          if (ch === ")") depth--;
          current += ch;
        }
        args.push(current.trim());
        for (const arg of args.slice(1)) expect(arg, list).toMatch(allowed);
      }
    }
    expect(calls).toBeGreaterThan(20);
  });
});

describe("core stays portable", () => {
  it("imports no node:* module", () => {
    const root = fileURLToPath(new URL("../../packages/core/src/", import.meta.url));
    const files = readdirSync(root, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      const text = readFileSync(root + file, "utf8");
      expect(text, file).not.toMatch(/^(import|export)[^\n]*from\s+["'](node:|ioredis|redis|@upstash)/m);
      expect(text, file).not.toMatch(/\bimport\(\s*["']node:/);
    }
  });
});

/** Length of a call's argument list: up to the parenthesis that closes `redis.call(`. */
function closing(list: string): number {
  let depth = 0;
  for (let i = 0; i < list.length; i++) {
    if (list[i] === "(") depth++;
    else if (list[i] === ")") {
      if (depth === 0) return i;
      depth--;
    }
  }
  return list.length;
}
