/*
 * Leased mode: what one instance keeps per key (the leases it holds, what is to go back, the call
 * in flight and the rate it has seen), for the decider (decider.ts).
 */

/** One lease held by this instance. */
export interface Lease {
  readonly id: string;
  units: number;
  readonly granted: number;
  /** When the request that brought it was sent (the limiter's clock). */
  readonly sentWall: number;
  readonly deadlineMono: number;
  readonly deadlineWall: number;
  /** Its life was cut short by the end of a window: a refresh before that end would get little. */
  readonly cut: boolean;
  readonly marks: readonly number[];
  /** The store's remaining and resetAt per policy when granted. */
  readonly remaining: readonly number[];
  readonly resetAt: readonly number[];
}

/** What the decider keeps per key. */
export interface KeyLeases {
  current: Lease | undefined;
  next: Lease | undefined;
  /** Leases done with, whose unspent units go back with the next store calls. */
  returns: { id: string; unspent: number }[];
  inflight: Promise<unknown> | undefined;
  /** When the call in flight was sent (monotonic), and how to give up on it. */
  inflightSent: number;
  abandon: () => void;
  multiplier: number;
  /** Units per second through this instance, smoothed; -1 until measured. */
  rate: number;
  /** Units served and ms elapsed between store calls, each smoothed. */
  servedAvg: number;
  elapsedAvg: number;
  servedSince: number;
  lastCallAt: number;
  /** Store round trip, smoothed (ms); 0 until measured. */
  rttMs: number;
  hint: number[];
  hintReset: number[];
}

export const monotonic = (): number => globalThis.performance?.now?.() ?? Date.now();

let counter = 0;
/** A lease id unique across instances: 64 random bits and a counter. */
export function newId(): string {
  const bytes = new Uint8Array(8);
  globalThis.crypto.getRandomValues(bytes);
  let id = "";
  for (const b of bytes) id += (b < 16 ? "0" : "") + b.toString(16);
  return `${id}${(counter++).toString(36)}`;
}

/** The state of a key not seen before. */
export const newKeyLeases = (): KeyLeases => ({
  current: undefined,
  next: undefined,
  returns: [],
  inflight: undefined,
  inflightSent: 0,
  abandon: () => undefined,
  multiplier: 1,
  rate: -1,
  servedAvg: 0,
  elapsedAvg: 0,
  servedSince: 0,
  lastCallAt: NaN,
  rttMs: 0,
  hint: [],
  hintReset: [],
});
