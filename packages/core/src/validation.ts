import * as z from "zod/mini";
import { describeValue, FloodgateError } from "./errors.ts";
import type { ForeignOptions } from "./foreign-options.ts";

/**
 * Checks one option's value: `true` when valid, anything else when not. A list or map returns the
 * path (keys, as an array) to its first bad entry, so that the message names it (`trustProxy.1`).
 * Called only for present options: an absent one is valid unless required.
 */
export type Check = (value: unknown) => unknown;

/** One option: its check, what it accepts in words (for messages), and `1` when it is required. */
export type OptionSpec = readonly [check: Check, accepted: string, required?: 1];

/** The options of one function, by name. */
export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

/** The error every invalid option throws: names the option, the value received and what is accepted. */
export function invalidOption(where: string, option: string, value: unknown, expected: string): FloodgateError {
  return new FloodgateError(
    "INVALID_OPTION",
    `${where}: invalid option \`${option}\`: received ${describeValue(value)}; expected ${expected}.`,
  );
}

// Each option is one zod schema, `z.unknown()` with one check: ours, from the option's table
// entry, which also gives the words of the message. A single schema kind keeps zod's share of a
// bundle small (no object, union, enum, record... schemas, each of which pulls its own code).
const schemas = new WeakMap<OptionSpecs, Record<string, z.ZodMiniType>>();

function schemasOf(specs: OptionSpecs): Record<string, z.ZodMiniType> {
  let shape = schemas.get(specs);
  if (shape === undefined) {
    shape = {};
    for (const name in specs) {
      const [check, , required] = specs[name]!;
      shape[name] = z.unknown().check((payload) => {
        const value = payload.value;
        const result = value === undefined ? !required : check(value);
        if (result !== true) payload.issues.push({ code: "custom", input: value, path: Array.isArray(result) ? result : [], message: "" });
      });
    }
    schemas.set(specs, shape);
  }
  return shape;
}

/**
 * Parses `input` against `specs` (each option with zod) once, at construction: returns the
 * options present. A failure throws one `FloodgateError("INVALID_OPTION")` that names the option,
 * the value received and what is accepted; an unknown option (a typo such as `windowMS`) explains
 * any other problem, so it is reported first.
 */
export function parseOptions<T>(input: unknown, where: string, specs: OptionSpecs, foreign?: ForeignOptions): T {
  const names = Object.keys(specs);
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new FloodgateError(
      "INVALID_OPTION",
      `${where}: expected an options object, received ${describeValue(input)}. Accepted options: ${names.join(", ")}.`,
    );
  }
  for (const key in input) {
    if (!Object.hasOwn(specs, key)) {
      const hint = foreign?.option(key);
      if (hint !== undefined) {
        throw new FloodgateError("INVALID_OPTION", `${where}: unknown option \`${key}\` ${hint}.`);
      }
      const guess = closest(key, [...names, ...(foreign?.names ?? [])]);
      const theirs = guess === undefined || Object.hasOwn(specs, guess) ? undefined : foreign?.option(guess);
      throw new FloodgateError(
        "INVALID_OPTION",
        `${where}: unknown option \`${key}\`${
          guess === undefined
            ? ""
            : theirs === undefined
            ? ` (did you mean \`${guess}\`?)`
            : ` (did you mean \`${guess}\`? ${theirs.slice(1).replace(");", ":")})`
        }; accepted options: ${names.join(", ")}.`,
      );
    }
  }
  const shape = schemasOf(specs);
  const options: Record<string, unknown> = {};
  for (const name of names) {
    let value = (input as Record<string, unknown>)[name];
    const result = shape[name]!.safeParse(value);
    if (!result.success) {
      const path = result.error.issues[0]!.path;
      const hint = path.length === 0 ? foreign?.value(name, value) : undefined;
      for (const key of path) value = (value as Record<PropertyKey, unknown>)[key];
      const error = invalidOption(where, [name, ...path].join("."), value, specs[name]![1]);
      if (hint !== undefined) error.message = `${error.message.slice(0, -1)} ${hint}.`;
      throw error;
    }
    if (value !== undefined) options[name] = value;
  }
  return options as T;
}

/**
 * The candidate nearest to `word` by edit distance (case ignored; a swap of two neighbours is one
 * edit), when it is near enough to be a slip: at most a third of the word's length, and 3.
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.floor(lower.length / 3)) + 1;
  for (const candidate of candidates) {
    const d = editDistance(lower, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}

// Checks shared by the option tables.

export const isFunction: Check = (v) => typeof v === "function";
export const isBoolean: Check = (v) => typeof v === "boolean";
export const isString: Check = (v) => typeof v === "string";

/** A whole number (a safe integer) from `min` to `max`. */
export const whole = (min: number, max = Number.MAX_SAFE_INTEGER): Check => (v) =>
  Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;

/** A whole number from `min` to `max`, called `noun` in messages. */
export const range = (noun: string, min: number, max: number): OptionSpec => [whole(min, max), `${noun} from ${min} to ${max}`];

/** One of `values`. */
export const oneOf = (values: readonly unknown[]): Check => (v) => values.includes(v);

/** One of two strings. */
export const choice = (a: string, b: string): OptionSpec => [oneOf([a, b]), `"${a}" or "${b}"`];

/** A plain object (an object literal or `Object.create(null)`). */
export const isRecord: Check = (v) => {
  if (typeof v !== "object" || v === null) return false;
  // As zod's isPlainObject: whose constructor, if any, is some realm's `Object`.
  const ctor: unknown = v.constructor;
  return typeof ctor !== "function" || Object.hasOwn(ctor.prototype ?? 0, "isPrototypeOf");
};

/** An object with methods of these names (duck typing). */
export const hasMethods = (...names: string[]): Check => (v) =>
  typeof v === "object" && v !== null && names.every((n) => typeof (v as Record<string, unknown>)[n] === "function");

/** Stores are duck-typed: anything with a `consume` method. */
export const isStore: Check = /* @__PURE__ */ hasMethods("consume");
export const STORE_ACCEPTED = "a store such as memoryStore(), upstashStore() or redisStore()";
export const CLOCK_ACCEPTED = "a function returning epoch milliseconds";

/** The option spec of a key namespace: a string with no `{`, `}` or NUL, of at most `max` characters. */
export const prefixOf = (max: number): OptionSpec => [
  (v) => typeof v === "string" && v.length <= max && !/[{}\u0000]/.test(v),
  `a string of at most ${max} characters without {, } or NUL`,
];

/** A container's answer for a bad entry at `key` whose own check answered `result`: the path to it. */
const pathTo = (key: string, result: unknown): string[] => [key, ...(Array.isArray(result) ? result : [])];

/** An array whose every entry passes `check`; else the path to the first that does not. */
export const arrayOf = (check: Check): Check => (v) => {
  if (!Array.isArray(v)) return false;
  const bad = v.findIndex((e) => check(e) !== true);
  return bad === -1 || pathTo(`${bad}`, check(v[bad]));
};

/** Any container whose enumerable entries all pass `check` (given the key too); else the path to the first that does not. */
const entriesOf = (isContainer: Check, check: (value: unknown, key: string) => unknown): Check => (v) => {
  if (isContainer(v) !== true) return false;
  for (const key in v as object) {
    const result = check((v as Record<string, unknown>)[key], key);
    if (result !== true) return pathTo(key, result);
  }
  return true;
};

/** A plain object (a map) whose every entry passes `check` (given the entry's key too). */
export const recordOf = (check: (value: unknown, key: string) => unknown): Check => entriesOf(isRecord, check);

/** An object (not an array) with only the keys of `checks`, each absent or passing its check. */
export const objectOf = (checks: Readonly<Record<string, Check>>): Check =>
  entriesOf(
    (v) => typeof v === "object" && v !== null && !Array.isArray(v),
    (value, key) => Object.hasOwn(checks, key) && (value === undefined || checks[key]!(value)),
  );
