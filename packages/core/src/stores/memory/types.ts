import type { HeldReservation, PolicySet, RateLimitStore, StoreResult } from "../store.ts";

/** Options of `memoryStore()`. */
export interface MemoryStoreOptions {
  /**
   * Most identifiers held at once (default 100,000, about 10 MB). When full, expired entries go
   * first, then the least recently used.
   */
  maxKeys?: number;
  /**
   * Most reservations outstanding at once (default 100,000). When full, expired ones go first,
   * then the oldest: it can no longer be settled or cancelled and counts as its estimate.
   */
  maxReservations?: number;
}

/** The embedded store: bounded, synchronous, with no timer and no work at import time. */
export interface MemoryStore extends RateLimitStore {
  readonly name: "memory";
  readonly synchronous: true;
  /** Identifiers currently held. */
  readonly size: number;
  /** Reservations outstanding (not yet settled, cancelled, or swept after their `ttl`). */
  readonly reservations: number;
  reserve(set: PolicySet, key: string, cost: number, nowMs: number, id: string, ttlMs: number): StoreResult;
  settle(set: PolicySet, key: string, id: string, actual: number, nowMs: number): boolean;
  reserveHeld(set: PolicySet, key: string, cost: number, nowMs: number, ttlMs: number): StoreResult | HeldReservation;
  dispose(): void;
}
