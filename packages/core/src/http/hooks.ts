import { errorText } from "../stores/resilient-store.ts";
import type { Warnings } from "./warnings.ts";

/** Calls a user hook (`onDecision`, `onStoreError`...) by name; returns what it returned, `undefined` if it threw. */
export type HookCaller = <Args extends unknown[], R>(
  name: string,
  hook: ((...args: Args) => R) | undefined,
  ...args: Args
) => R | undefined;

/**
 * Hooks observe, they do not decide for the request: one that throws, or returns a promise that
 * rejects, is logged through `warnings` and never fails the request or goes unhandled in the host app.
 */
export function hookCaller(warnings: Warnings): HookCaller {
  const failed = (name: string, error: unknown): void =>
    warnings.log(`The ${name} hook threw, and the request went on without it: ${errorText(error)}`);
  return (name, hook, ...args) => {
    try {
      const returned = hook?.(...args);
      if (typeof (returned as Promise<unknown> | undefined)?.then === "function") {
        (returned as Promise<unknown>).then(undefined, (error: unknown) => failed(name, error));
      }
      return returned;
    } catch (error) {
      failed(name, error);
      return undefined;
    }
  };
}
