/**
 * Imported first by the test Workers: records every timer, fetch or random-value call made while
 * the modules are being evaluated (global scope), before workerd itself would reject it. The
 * entry calls `globalScope.done()` as its last global statement; `/__global-scope` reports.
 */
const g = globalThis as unknown as Record<string, unknown>;
const calls: string[] = [];
let loading = true;

for (const name of ["setTimeout", "setInterval", "queueMicrotask", "fetch"]) {
  const original = g[name] as ((...args: unknown[]) => unknown) | undefined;
  if (typeof original !== "function") continue;
  g[name] = function guarded(...args: unknown[]): unknown {
    if (loading) calls.push(name);
    return original.apply(globalThis, args);
  };
}
const cryptoObject = globalThis.crypto as unknown as Record<string, (...args: unknown[]) => unknown>;
for (const name of ["getRandomValues", "randomUUID"]) {
  const original = cryptoObject[name];
  if (typeof original !== "function") continue;
  cryptoObject[name] = function guarded(...args: unknown[]): unknown {
    if (loading) calls.push(`crypto.${name}`);
    return original.apply(globalThis.crypto, args);
  };
}

export const globalScope = {
  /** Calls made at global scope (empty when the modules load cleanly). */
  calls,
  done(): void {
    loading = false;
  },
};
