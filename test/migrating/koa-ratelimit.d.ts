// koa-ratelimit ships no types: the options its README documents, as the examples use them.
declare module "koa-ratelimit" {
  import type { Context, Middleware } from "koa";

  interface KoaRateLimitOptions {
    driver?: "redis" | "memory";
    /** An ioredis client (redis driver) or a Map (memory driver). */
    db: unknown;
    duration?: number;
    max?: number;
    id?: (ctx: Context) => string | false;
    errorMessage?: string;
    namespace?: string;
    headers?: { remaining?: string; reset?: string; total?: string };
    disableHeader?: boolean;
    whitelist?: (ctx: Context) => boolean | Promise<boolean>;
    blacklist?: (ctx: Context) => boolean | Promise<boolean>;
    onLimited?: (ctx: Context) => void;
    status?: number;
    throw?: boolean;
  }

  export default function ratelimit(options: KoaRateLimitOptions): Middleware;
}
