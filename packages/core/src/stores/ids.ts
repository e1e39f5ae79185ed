/*
 * Names of ledger records (reservations): unique across processes, made cheaply. The limiter
 * names the records of a remote store; a store that keeps its ledger in process (the memory
 * store) names its own with the same helpers, and finds one again from its id.
 */

/**
 * Reservation ids: 64 random bits per process (per copy of this module) in base 36, then a
 * decimal serial number (a number's decimal string is V8's cheap conversion; base 36 costs a
 * runtime call per id). Unique across processes with overwhelming probability, never reused
 * within one. A store that names its own records may keep the serial number alone and make the
 * string only when an id is read (bench/README.md, "Reservations", has what that saves).
 */
let idPrefix: string | undefined;
let idCounter = 0;

function prefixOfIds(): string {
  const words = new Uint32Array(2);
  const crypto = (globalThis as { crypto?: { getRandomValues?(a: Uint32Array): Uint32Array } }).crypto;
  if (typeof crypto?.getRandomValues === "function") crypto.getRandomValues(words);
  else {
    words[0] = Math.random() * 2 ** 32;
    words[1] = Math.random() * 2 ** 32;
  }
  return idPrefix = `${words[0]!.toString(36)}${words[1]!.toString(36)}_`;
}

/** The next reservation serial number of this process: its id is {@link idOf} it. */
export const nextSerial = (): number => ++idCounter;

/** The id of the reservation with this serial number. */
export const idOf = (serial: number): string => (idPrefix ?? prefixOfIds()) + serial;

/** A fresh reservation id, for stores that record ids as strings. */
export const nextId = (): string => idOf(nextSerial());

/** The serial number of an id this process made ({@link idOf}); `undefined` for any other string. */
export function serialOf(id: string): number | undefined {
  const prefix = idPrefix;
  if (prefix === undefined || id.length <= prefix.length || !id.startsWith(prefix)) return undefined;
  const serial = Number(id.slice(prefix.length));
  // Only the canonical spelling: "…_007" or "…_1e3" name no reservation.
  return Number.isSafeInteger(serial) && serial >= 1 && serial <= idCounter && prefix + serial === id ? serial : undefined;
}
