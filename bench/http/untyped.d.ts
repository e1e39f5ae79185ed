// Minimal types for the benchmark's untyped dependencies.
declare module "autocannon" {
  interface Result {
    requests: { average: number };
    latency: { p99: number };
    non2xx: number;
    errors: number;
  }
  export default function autocannon(options: { url: string; connections: number; duration: number }): Promise<Result>;
}
declare module "koa-ratelimit" {
  import type { Context, Middleware } from "koa";
  export default function ratelimit(
    options: { driver: "memory"; db: Map<unknown, unknown>; duration: number; max: number; id: (ctx: Context) => string },
  ): Middleware;
}
