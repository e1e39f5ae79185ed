import { connectResp, type RespClient, RespError, type RespTarget } from "./resp.ts";
import type { PoolStats, RedisEndpoint } from "./bridge-types.ts";
import { type Command, HttpError } from "./bridge-commands.ts";

/** The bridge's Redis connections: one borrowed per HTTP request, reused only when still in the pool's default state. */
export class RedisPool {
  private readonly idleConnections: RespClient[] = [];
  private readonly all = new Set<RespClient>();
  private closing = false;
  readonly stats: PoolStats;

  constructor(
    private readonly endpoint: RedisEndpoint,
    private readonly maxIdle: number,
  ) {
    const idle = this.idleConnections;
    this.stats = {
      created: 0,
      reused: 0,
      discarded: 0,
      get idle() {
        return idle.length;
      },
    };
  }

  async acquire(): Promise<RespClient> {
    if (this.closing) throw new HttpError(503, "bridge is stopping");
    for (let conn = this.idleConnections.pop(); conn !== undefined; conn = this.idleConnections.pop()) {
      if (!conn.isClosed) {
        this.stats.reused++;
        return conn;
      }
    }
    const target: RespTarget = "socket" in this.endpoint
      ? { path: this.endpoint.socket }
      : { host: this.endpoint.host, port: this.endpoint.port };
    let conn: RespClient;
    try {
      conn = await connectResp(target, { connectTimeoutMs: 2000 });
    } catch (error) {
      throw new HttpError(503, `bridge: redis unreachable: ${(error as Error).message}`);
    }
    this.stats.created++;
    this.all.add(conn);
    void conn.closed.then(() => {
      this.all.delete(conn);
      const at = this.idleConnections.indexOf(conn);
      if (at !== -1) this.idleConnections.splice(at, 1);
    });
    const setup: Command[] = [];
    if (this.endpoint.password !== undefined) {
      setup.push(
        this.endpoint.username !== undefined
          ? [Buffer.from("AUTH"), Buffer.from(this.endpoint.username), Buffer.from(this.endpoint.password)]
          : [Buffer.from("AUTH"), Buffer.from(this.endpoint.password)],
      );
    }
    if (this.endpoint.db !== undefined && this.endpoint.db !== 0) {
      setup.push([Buffer.from("SELECT"), Buffer.from(String(this.endpoint.db))]);
    }
    if (setup.length > 0) {
      const replies = await conn.pipeline(setup).catch((error: Error) => [new RespError(error.message)]);
      const failed = replies.find((r) => r instanceof RespError);
      if (failed instanceof RespError) {
        conn.destroy();
        throw new HttpError(503, `bridge: redis connection setup failed: ${failed.message}`);
      }
    }
    return conn;
  }

  release(conn: RespClient, reusable: boolean): void {
    if (reusable && !this.closing && !conn.isClosed && this.idleConnections.length < this.maxIdle) {
      this.idleConnections.push(conn);
      return;
    }
    this.stats.discarded++;
    conn.destroy();
  }

  close(): void {
    this.closing = true;
    this.idleConnections.length = 0;
    for (const conn of this.all) conn.destroy();
  }
}
