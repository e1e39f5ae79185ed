// Brute-force protection for a login route, on every integration: at most 5 failed logins per
// 15 minutes per user AND per client address, then that user (or address) is blocked for an hour;
// successful logins are not counted, and a successful login clears the user's failures.
//   npx tsx examples/login/server.ts
import { fixedWindow, type HttpRateLimitOptions, type RateLimitHandle, type RateLimitStore } from "@floodgate/core";

/** 5 failures per 15 minutes; the request after them blocks the key for an hour. */
export const FAILED_LOGINS = fixedWindow({ limit: 5, window: "15m", block: "1h", name: "failed-logins" });

/** The demo's one account. */
const USERS: Record<string, string> = { alice: "correct horse battery staple" };

/** Whether the credentials are right (a real app compares password hashes). */
export const checkPassword = (user: unknown, password: unknown): boolean =>
  typeof user === "string" && USERS[user] !== undefined && USERS[user] === password;

/** The key of the per-user limiter. */
export const userKey = (user: unknown): string => `user:${typeof user === "string" && user !== "" ? user : "-"}`;

/** What both login limiters share; `store` is where the counters live (memory, Redis...). */
export function loginOptions(store: RateLimitStore, extra: Partial<HttpRateLimitOptions<any>> = {}): HttpRateLimitOptions<any> {
  return {
    policy: FAILED_LOGINS,
    store,
    // Only failures count: a request answered below 400 is given back.
    skipSuccessfulRequests: true,
    ...extra,
  };
}

/**
 * After a successful login: forget the user's earlier failures (the per-address count stays,
 * so a client cannot clear its address's count by logging into an account of its own).
 */
export async function loggedIn(byUser: RateLimitHandle, user: string): Promise<void> {
  await byUser.reset(userKey(user));
}
