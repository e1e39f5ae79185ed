/** What the store-fault suite's test process and its app process (fault-apps.ts) share. */
import type { DecisionSource, ResilientStoreStats, StoreErrorAction } from "../../packages/core/src/index.ts";

export const STORES = ["ioredis", "upstash"] as const;
export const POLICIES: readonly StoreErrorAction[] = ["fallback", "allow", "deny"];
/** Large enough that the store never denies: every store-answered request is an admission. */
export const LIMIT = 1_000_000;

export interface AppInfo {
  name: string;
  integration: string;
  store: (typeof STORES)[number];
  policy: StoreErrorAction;
  port: number;
  prefix: string;
}

export interface AppCounts {
  /** Decisions by source, and admissions answered by the store. */
  bySource: Record<DecisionSource, number>;
  storeAdmissions: number;
  /** Date.now() of the latest decision not answered by the store (0: none). */
  lastNotStoreAt: number;
  /** Errors that reached the app's own error handler (each a 500). */
  errors: number;
  /** Units the store holds for the app's key, by a peek on a separate connection. */
  held?: number;
}

export interface StatsReply {
  type: "stats";
  apps: Record<string, AppCounts>;
  stores: Record<string, ResilientStoreStats & { maxInFlight: number }>;
  unhandledRejections: string[];
  uncaughtExceptions: string[];
  /** With `peek`: per app, [Date.now() at arrival, ms to the decision, 1 if the store decided] triples, flat. */
  decisionTimes?: Record<string, number[]>;
  /** With `peek`: per store, [Date.now() sent, Date.now() settled] of every consume sent to it, flat. */
  consumeTimes?: Record<string, number[]>;
  /** With `peek`: [Date.now(), event-loop lag in ms] pairs, flat, every 10 ms. */
  lag?: number[];
  /** Lines the resilient stores logged (failing, recovered), each after its Date.now(). */
  logged: string[];
}

export type Command =
  | { type: "stats"; peek?: boolean }
  | { type: "settle"; timeoutMs: number }
  | { type: "exit" };
