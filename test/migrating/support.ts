// Helpers for the migration tests: real HTTP servers on 127.0.0.1 (kernel-picked ports), request
// traces, and waiting out window boundaries on the real clock.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { vi } from "vitest";

export interface Served {
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  close(): Promise<void>;
}

/** Serves a Node request listener (an Express app, `koaApp.callback()`...) on a free loopback port. */
export async function serve(listener: http.RequestListener): Promise<Served> {
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sends the requests one after the other; answers their statuses. */
export async function statuses(n: number, url: string, init?: RequestInit): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const response = await fetch(url, init);
    await response.arrayBuffer();
    out.push(response.status);
  }
  return out;
}

/** How many of the statuses are 2xx. */
export const admitted = (list: readonly number[]): number => list.filter((s) => s >= 200 && s < 300).length;

/**
 * Waits until the real clock is at least `marginMs` away from the next multiple of `windowMs`
 * (a Floodgate window boundary), so a trace sent now stays inside one aligned window.
 */
export async function clearOfBoundary(windowMs: number, marginMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await sleep(left + 20);
}

/** Waits until the real clock is `offsetMs` into a window of `windowMs` (aligned to the epoch). */
export async function waitForOffset(windowMs: number, offsetMs: number): Promise<void> {
  const into = Date.now() % windowMs;
  await sleep((offsetMs - into + windowMs) % windowMs);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Fakes only `Date` (timers, sockets and I/O stay real) and sets it to `at`: every limiter built
 * afterwards, the peer's and Floodgate's alike, reads this clock through `Date.now()`.
 */
export function fakeDate(at: number): { advance(ms: number): void; restore(): void } {
  vi.useFakeTimers({ toFake: ["Date"], now: at });
  return {
    advance: (ms) => vi.setSystemTime(Date.now() + ms),
    restore: () => vi.useRealTimers(),
  };
}

/** A time aligned to a whole day of the epoch (so to every minute and second), in late 2026. */
export const ALIGNED = 1_795_000_000_000 - (1_795_000_000_000 % 86_400_000);

/**
 * Waits until `check` stops throwing: for counts a peer or Floodgate adjusts after the response
 * has been sent (skipSuccessfulRequests), which the next request must see.
 */
export const settled = (check: () => void | Promise<void>): Promise<void> => vi.waitFor(check, { timeout: 2000, interval: 5 });
