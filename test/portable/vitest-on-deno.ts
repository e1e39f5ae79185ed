/**
 * The subset of vitest's API our suites use, on `Deno.test`, so that the very same test files run
 * under Deno (jsr's std/expect cannot be fetched here). The root deno.json maps "vitest" here.
 * Bun needs no such shim: `bun test` understands vitest imports itself.
 *
 * describe/it register flat `Deno.test`s in order; hooks run around them like vitest's.
 */
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";

declare const Deno: {
  test(
    options: {
      name: string;
      fn: () => Promise<void>;
      ignore?: boolean;
      sanitizeOps?: boolean;
      sanitizeResources?: boolean;
      sanitizeExit?: boolean;
    },
  ): void;
};

type Fn = () => unknown;
interface Suite {
  name: string;
  parent: Suite | undefined;
  beforeAll: Fn[];
  afterAll: Fn[];
  beforeEach: Fn[];
  afterEach: Fn[];
  pendingTests: number;
  started: boolean;
}

const root: Suite = {
  name: "",
  parent: undefined,
  beforeAll: [],
  afterAll: [],
  beforeEach: [],
  afterEach: [],
  pendingTests: 0,
  started: false,
};
let current = root;

const chain = (suite: Suite): Suite[] => {
  const list: Suite[] = [];
  for (let s: Suite | undefined = suite; s; s = s.parent) list.unshift(s);
  return list;
};

function format(template: string, args: unknown[], index: number): string {
  let i = 0;
  const row = args[0];
  if (args.length === 1 && typeof row === "object" && row !== null) {
    template = template.replace(/\$([A-Za-z_][\w]*)/g, (_m, key: string) => String((row as Record<string, unknown>)[key]));
  }
  return template.replace(/%[sdjio#%]/g, (token) => {
    if (token === "%%") return "%";
    if (token === "%#") return String(index);
    const value = args[i++];
    return token === "%j" || token === "%o" ? JSON.stringify(value) : String(value);
  });
}

function withEach<T extends (name: string, fn: (...args: never[]) => unknown) => void>(register: T) {
  return (table: readonly unknown[]) => (name: string, fn: (...args: unknown[]) => unknown) => {
    table.forEach((row, index) => {
      const args = Array.isArray(row) ? row : [row];
      register(format(name, args, index), (() => fn(...args)) as never);
    });
  };
}

function registerDescribe(name: string, body: () => void): void {
  const suite: Suite = {
    name,
    parent: current,
    beforeAll: [],
    afterAll: [],
    beforeEach: [],
    afterEach: [],
    pendingTests: 0,
    started: false,
  };
  const outer = current;
  current = suite;
  try {
    body();
  } finally {
    current = outer;
  }
}

function registerTest(name: string, fn: Fn, ignore = false): void {
  const suites = chain(current);
  for (const s of suites) s.pendingTests++;
  const fullName = [...suites.map((s) => s.name).filter(Boolean), name].join(" > ");
  Deno.test({
    name: fullName,
    ignore,
    sanitizeOps: false,
    sanitizeResources: false,
    sanitizeExit: false,
    async fn() {
      try {
        for (const s of suites) {
          if (!s.started) {
            s.started = true;
            for (const hook of s.beforeAll) await hook();
          }
        }
        for (const s of suites) for (const hook of s.beforeEach) await hook();
        try {
          await fn();
        } finally {
          for (const s of [...suites].reverse()) for (const hook of s.afterEach) await hook();
        }
      } finally {
        for (const s of [...suites].reverse()) {
          if (--s.pendingTests === 0) { for (const hook of s.afterAll) await hook(); }
        }
      }
    },
  });
}

export const describe = Object.assign(registerDescribe, {
  each: withEach(registerDescribe as never),
  skip: (_name: string, _body: () => void) => {},
});
export const it = Object.assign((name: string, fn: Fn) => registerTest(name, fn), {
  each: withEach(((name: string, fn: Fn) => registerTest(name, fn)) as never),
  skip: (name: string, fn: Fn) => registerTest(name, fn, true),
  skipIf: (condition: boolean) => (name: string, fn: Fn) => registerTest(name, fn, condition),
  runIf: (condition: boolean) => (name: string, fn: Fn) => registerTest(name, fn, !condition),
});
export const test = it;
export const beforeAll = (fn: Fn): void => void current.beforeAll.push(fn);
export const afterAll = (fn: Fn): void => void current.afterAll.push(fn);
export const beforeEach = (fn: Fn): void => void current.beforeEach.push(fn);
export const afterEach = (fn: Fn): void => void current.afterEach.push(fn);

// ---- expect ----------------------------------------------------------------------------------

const ASYMMETRIC = Symbol("asymmetric");
interface Asymmetric {
  [ASYMMETRIC]: (actual: unknown) => boolean;
  toString(): string;
}
const asymmetric = (description: string, test: (actual: unknown) => boolean): Asymmetric => ({
  [ASYMMETRIC]: test,
  toString: () => description,
});
const isAsymmetric = (value: unknown): value is Asymmetric => typeof value === "object" && value !== null && ASYMMETRIC in value;

function matches(actual: unknown, expected: unknown, partial: boolean): boolean {
  if (isAsymmetric(expected)) return expected[ASYMMETRIC](actual);
  if (Object.is(actual, expected)) return true;
  if (typeof expected !== "object" || expected === null || typeof actual !== "object" || actual === null) return false;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    return expected.every((e, i) => matches(actual[i], e, partial));
  }
  if (expected instanceof Date || expected instanceof RegExp) return isDeepStrictEqual(actual, expected);
  const a = actual as Record<string, unknown>;
  const e = expected as Record<string, unknown>;
  const keys = Object.keys(e).filter((k) => e[k] !== undefined);
  if (!partial) {
    const actualKeys = Object.keys(a).filter((k) => a[k] !== undefined);
    if (actualKeys.length !== keys.length) return false;
  }
  return keys.every((k) => matches(a[k], e[k], partial));
}

const show = (value: unknown): string => {
  try {
    return typeof value === "string"
      ? JSON.stringify(value)
      : (JSON.stringify(value, (_k, v) => (isAsymmetric(v) ? String(v) : v)) ?? String(value));
  } catch {
    return String(value);
  }
};

// deno-lint-ignore no-explicit-any
type Matchers = Record<string, (...args: any[]) => any>;

function makeMatchers(actual: unknown, negate: boolean): Matchers {
  const check = (pass: boolean, message: string): void => {
    if (pass === negate) throw new assert.AssertionError({ message: negate ? `not: ${message}` : message });
  };
  return {
    toBe: (expected: unknown) => check(Object.is(actual, expected), `expected ${show(actual)} to be ${show(expected)}`),
    toEqual: (expected: unknown) => check(matches(actual, expected, false), `expected ${show(actual)} to equal ${show(expected)}`),
    toStrictEqual: (expected: unknown) =>
      check(isDeepStrictEqual(actual, expected), `expected ${show(actual)} to strictly equal ${show(expected)}`),
    toMatchObject: (expected: unknown) => check(matches(actual, expected, true), `expected ${show(actual)} to match ${show(expected)}`),
    toBeGreaterThan: (n: number) => check((actual as number) > n, `expected ${show(actual)} > ${n}`),
    toBeGreaterThanOrEqual: (n: number) => check((actual as number) >= n, `expected ${show(actual)} >= ${n}`),
    toBeLessThan: (n: number) => check((actual as number) < n, `expected ${show(actual)} < ${n}`),
    toBeLessThanOrEqual: (n: number) => check((actual as number) <= n, `expected ${show(actual)} <= ${n}`),
    toBeCloseTo: (n: number, digits = 2) =>
      check(Math.abs((actual as number) - n) < 10 ** -digits / 2, `expected ${show(actual)} close to ${n}`),
    toBeDefined: () => check(actual !== undefined, `expected a defined value`),
    toBeUndefined: () => check(actual === undefined, `expected ${show(actual)} to be undefined`),
    toBeNull: () => check(actual === null, `expected ${show(actual)} to be null`),
    toBeTruthy: () => check(Boolean(actual), `expected ${show(actual)} to be truthy`),
    toBeFalsy: () => check(!actual, `expected ${show(actual)} to be falsy`),
    toBeInstanceOf: (type: new (...args: never[]) => unknown) => check(actual instanceof type, `expected an instance of ${type.name}`),
    toBeTypeOf: (type: string) => {
      const actualType: string = typeof actual; // compared with a string the caller gives, not a literal
      return check(actualType === type, `expected ${show(actual)} to be of type ${type}`);
    },
    toHaveLength: (n: number) =>
      check((actual as { length: number }).length === n, `expected length ${n}, got ${(actual as { length: number })?.length}`),
    toHaveProperty: (key: string, value?: unknown) =>
      check(
        actual !== null && actual !== undefined && key in Object(actual) &&
          (value === undefined || matches((actual as Record<string, unknown>)[key], value, false)),
        `expected property ${key}`,
      ),
    toContain: (item: unknown) =>
      check(
        typeof actual === "string" ? actual.includes(item as string) : (actual as unknown[]).includes(item),
        `expected ${show(actual)} to contain ${show(item)}`,
      ),
    toMatch: (pattern: RegExp | string) =>
      check(
        typeof pattern === "string" ? (actual as string).includes(pattern) : pattern.test(actual as string),
        `expected ${show(actual)} to match ${pattern}`,
      ),
    toThrow: (expected?: unknown) => {
      let thrown: unknown;
      let threw = false;
      try {
        (actual as () => unknown)();
      } catch (error) {
        threw = true;
        thrown = error;
      }
      check(
        threw && errorMatches(thrown, expected),
        `expected the function to throw ${expected === undefined ? "" : show(String(expected))}`,
      );
    },
    toHaveBeenCalled: () => check((actual as Spy).calls.length > 0, "expected the spy to have been called"),
    toHaveBeenCalledTimes: (n: number) =>
      check((actual as Spy).calls.length === n, `expected ${n} calls, got ${(actual as Spy).calls.length}`),
  };
}

function errorMatches(error: unknown, expected: unknown): boolean {
  if (expected === undefined) return true;
  const message = (error as Error)?.message ?? String(error);
  if (typeof expected === "string") return message.includes(expected);
  if (expected instanceof RegExp) return expected.test(message);
  if (typeof expected === "function") return error instanceof (expected as new () => unknown);
  return matches(error, expected, true);
}

function promiseMatchers(promise: Promise<unknown>, settle: "resolves" | "rejects", negate: boolean): Matchers {
  const base = makeMatchers(undefined, negate);
  const out: Matchers = {};
  for (const name of Object.keys(base)) {
    out[name] = (async (...args: unknown[]) => {
      let value: unknown;
      try {
        value = await promise;
        if (settle === "rejects") {
          throw new assert.AssertionError({ message: `expected the promise to reject, it resolved to ${show(value)}` });
        }
      } catch (error) {
        if (error instanceof assert.AssertionError && settle === "rejects") throw error;
        if (settle === "resolves") throw error;
        value = error;
      }
      if (name === "toThrow") {
        return makeMatchers(() => {
          throw value;
        }, negate).toThrow!(...(args as never[]));
      }
      return (makeMatchers(value, negate)[name] as (...a: unknown[]) => unknown)(...args);
    }) as never;
  }
  return out;
}

interface Expect {
  (actual: unknown): Matchers & { not: Matchers; resolves: Matchers & { not: Matchers }; rejects: Matchers & { not: Matchers } };
  stringContaining(text: string): Asymmetric;
  stringMatching(pattern: RegExp): Asymmetric;
  any(type: unknown): Asymmetric;
  anything(): Asymmetric;
  objectContaining(object: Record<string, unknown>): Asymmetric;
  arrayContaining(items: unknown[]): Asymmetric;
}

export const expect: Expect = Object.assign(
  (actual: unknown) => {
    const promise = actual as Promise<unknown>;
    return Object.assign(makeMatchers(actual, false), {
      not: makeMatchers(actual, true),
      get resolves() {
        return Object.assign(promiseMatchers(promise, "resolves", false), { not: promiseMatchers(promise, "resolves", true) });
      },
      get rejects() {
        return Object.assign(promiseMatchers(promise, "rejects", false), { not: promiseMatchers(promise, "rejects", true) });
      },
    });
  },
  {
    stringContaining: (text: string) => asymmetric(`StringContaining ${text}`, (a) => typeof a === "string" && a.includes(text)),
    stringMatching: (pattern: RegExp) => asymmetric(`StringMatching ${pattern}`, (a) => typeof a === "string" && pattern.test(a)),
    any: (type: unknown) =>
      asymmetric(
        `Any`,
        (a) =>
          type === Number
            ? typeof a === "number"
            : type === String
            ? typeof a === "string"
            : type === Boolean
            ? typeof a === "boolean"
            : type === Function
            ? typeof a === "function"
            : a instanceof (type as new () => unknown),
      ),
    anything: () => asymmetric("Anything", (a) => a !== null && a !== undefined),
    objectContaining: (object: Record<string, unknown>) => asymmetric(`ObjectContaining`, (a) => matches(a, object, true)),
    arrayContaining: (items: unknown[]) =>
      asymmetric(`ArrayContaining`, (a) => Array.isArray(a) && items.every((i) => a.some((x) => matches(x, i, false)))),
  },
) as Expect;

// ---- vi (the little the suites use) ------------------------------------------------------------

interface Spy {
  calls: unknown[][];
  mockRestore(): void;
}

export const vi = {
  fn<T extends (...args: never[]) => unknown>(impl?: T) {
    const calls: unknown[][] = [];
    const spy = Object.assign((...args: unknown[]) => {
      calls.push(args);
      return impl?.(...(args as never[]));
    }, { calls, mock: { calls }, mockRestore() {} });
    return spy;
  },
  spyOn(object: Record<string, unknown>, method: string) {
    const original = object[method] as (...args: unknown[]) => unknown;
    const calls: unknown[][] = [];
    const spy = Object.assign(function (this: unknown, ...args: unknown[]) {
      calls.push(args);
      return original.apply(this, args);
    }, { calls, mock: { calls }, mockRestore: () => void (object[method] = original) });
    object[method] = spy;
    return spy;
  },
  resetModules() {},
};
