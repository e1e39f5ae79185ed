/**
 * A TCP proxy in front of a server (redis-server) that can make the connections it carries go
 * half-open: `freezeExisting()` stops forwarding anything, either way, on every connection open
 * at that moment (their sockets stay open, as behind a NAT or load balancer that lost their
 * state), while connections opened afterwards are forwarded as usual.
 */
import net from "node:net";

export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Every connection open now stops forwarding, silently; new ones work. */
  freezeExisting(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const live = new Set<{ frozen: boolean; client: net.Socket; upstream: net.Socket }>();
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(targetPort, targetHost);
    const pair = { frozen: false, client, upstream };
    live.add(pair);
    client.on("data", (chunk) => {
      if (!pair.frozen) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!pair.frozen) client.write(chunk);
    });
    const end = (): void => {
      live.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get accepted() {
      return accepted;
    },
    freezeExisting() {
      for (const pair of live) pair.frozen = true;
    },
    async close() {
      for (const pair of live) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A server that accepts TCP connections and never answers anything: a black hole at the right address. */
export async function startBlackHole(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => undefined);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A loopback port nothing listens on (bound by the kernel, then released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
