/**
 * The algorithm registry is the one list of kinds: these checks fail, naming the place, when a
 * kind added to it is missing from something that cannot derive from it (the package's exports,
 * messages, the options reference's algorithm table).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { algorithmOf } from "../../packages/core/src/algorithms/algorithm.ts";
import { ALGORITHMS, POLICY_KINDS } from "../../packages/core/src/algorithms/registry.ts";
import { isPolicy, POLICIES_ACCEPTED } from "../../packages/core/src/policies.ts";
import { luaScripts, SCRIPT_SHA } from "../../packages/core/src/stores/redis/lua.ts";
import { example } from "../support/kinds.ts";

const OPTIONS_REFERENCE = readFileSync(new URL("../../docs/reference/options.md", import.meta.url), "utf8");

describe.each(POLICY_KINDS)("registered kind %s", (kind) => {
  const definition = ALGORITHMS[kind];

  it("is listed under its own kind, and its exported factory builds policies of that kind", () => {
    expect(definition.kind).toBe(kind);
    const policy = example(kind, 3, 60_000, "x");
    expect(isPolicy(policy)).toBe(true);
    expect([policy.kind, policy.limit, policy.name]).toEqual([kind, 3, "x"]);
    expect(typeof algorithmOf(policy).apply).toBe("function");
    expect(Object.isFrozen(policy)).toBe(true);
  });

  it("is named where a message lists what a policy option accepts", () => {
    expect(POLICIES_ACCEPTED).toContain(`${definition.factoryName}()`);
  });

  it("has a row in the options reference's algorithm table with its figures", () => {
    const d = definition.docs;
    expect(OPTIONS_REFERENCE).toContain(`| \`${d.call}\` | ${d.statePerKey} | ${d.guarantee} | ${d.resetAt} |`);
    expect(d.call.startsWith(`${definition.factoryName}(`)).toBe(true);
  });

  it("has its own Lua script and kind letter", () => {
    expect(luaScripts()[kind].source).toContain(definition.lua.fragments.eval);
    expect(luaScripts().multi.source).toContain(`kind == "${definition.lua.code}" then\n${definition.lua.fragments.eval}`);
    expect(SCRIPT_SHA[kind]).toMatch(/^[0-9a-f]{40}$/);
    expect(POLICY_KINDS.filter((k) => ALGORITHMS[k].lua.code === definition.lua.code)).toEqual([kind]);
    expect(Number.isInteger(definition.lua.parameter(example(kind, 3, 60_000)))).toBe(true);
  });
});
