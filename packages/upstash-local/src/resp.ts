/**
 * A minimal RESP2 client over node:net, for the local Upstash bridge (and for tests that drive
 * Redis directly).
 *
 * Commands go out as arrays of bulk strings; replies come back raw: bulk and status strings
 * as Buffers (never decoded to text, so binary values survive), integers as numbers, nil bulk
 * and nil array as `null`, arrays nested, and error replies as `RespError` VALUES (resolved,
 * not thrown) so a pipeline can hold errors beside results. RESP3 is deliberately unsupported.
 */
import net from "node:net";

/** A Redis error reply (`-ERR ...`), returned as a value. `message` is the text after `-`. */
export class RespError extends Error {
  override name = "RespError";
}

/** The client or the parser met bytes that are not RESP2 (or a reply nobody asked for). */
export class RespProtocolError extends Error {
  override name = "RespProtocolError";
}

export type RespValue = Buffer | number | null | RespError | RespValue[];
export type RespArg = string | Buffer | number;

const CRLF = Buffer.from("\r\n");
const EMPTY = Buffer.alloc(0);

/** Encodes one command as a RESP array of bulk strings. Numbers become `String(n)`. */
export function encodeCommand(args: readonly RespArg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg), "utf8");
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, CRLF);
  }
  return Buffer.concat(parts);
}

interface Parsed {
  value: RespValue;
  next: number;
}

/**
 * Incremental RESP2 reply parser: feed it chunks as they arrive, get back every reply that is
 * complete so far. A reply split across any number of chunks, at any byte, is reassembled.
 */
export class RespParser {
  private buffer: Buffer = EMPTY;

  push(chunk: Buffer): RespValue[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const replies: RespValue[] = [];
    let offset = 0;
    for (;;) {
      const parsed = this.parseAt(offset);
      if (parsed === undefined) break;
      replies.push(parsed.value);
      offset = parsed.next;
    }
    this.buffer = offset >= this.buffer.length ? EMPTY : this.buffer.subarray(offset);
    return replies;
  }

  /** Bytes received but not yet part of a complete reply. */
  get pendingBytes(): number {
    return this.buffer.length;
  }

  private readLine(pos: number): { line: string; next: number } | undefined {
    const end = this.buffer.indexOf(CRLF, pos);
    if (end === -1) return undefined;
    return { line: this.buffer.toString("utf8", pos, end), next: end + 2 };
  }

  private readInteger(pos: number, what: string): { n: number; next: number } | undefined {
    const line = this.readLine(pos);
    if (line === undefined) return undefined;
    if (!/^-?\d+$/.test(line.line)) {
      throw new RespProtocolError(`invalid ${what} ${JSON.stringify(line.line)}`);
    }
    return { n: Number(line.line), next: line.next };
  }

  private parseAt(pos: number): Parsed | undefined {
    if (pos >= this.buffer.length) return undefined;
    const type = this.buffer[pos];
    switch (type) {
      case 0x2b /* + */: {
        const end = this.buffer.indexOf(CRLF, pos + 1);
        if (end === -1) return undefined;
        return { value: Buffer.from(this.buffer.subarray(pos + 1, end)), next: end + 2 };
      }
      case 0x2d /* - */: {
        const line = this.readLine(pos + 1);
        if (line === undefined) return undefined;
        return { value: new RespError(line.line), next: line.next };
      }
      case 0x3a /* : */: {
        // Integers past 2^53 lose precision here, as they do in any JSON client.
        const int = this.readInteger(pos + 1, "integer");
        if (int === undefined) return undefined;
        return { value: int.n, next: int.next };
      }
      case 0x24 /* $ */: {
        const header = this.readInteger(pos + 1, "bulk length");
        if (header === undefined) return undefined;
        if (header.n < 0) return { value: null, next: header.next };
        const end = header.next + header.n;
        if (end + 2 > this.buffer.length) return undefined;
        if (this.buffer[end] !== 0x0d || this.buffer[end + 1] !== 0x0a) {
          throw new RespProtocolError("bulk string not terminated by CRLF");
        }
        // Copy, so a reply never pins the whole receive buffer in memory.
        return { value: Buffer.from(this.buffer.subarray(header.next, end)), next: end + 2 };
      }
      case 0x2a /* * */: {
        const header = this.readInteger(pos + 1, "array length");
        if (header === undefined) return undefined;
        if (header.n < 0) return { value: null, next: header.next };
        const items: RespValue[] = [];
        let next = header.next;
        for (let i = 0; i < header.n; i++) {
          const item = this.parseAt(next);
          if (item === undefined) return undefined;
          items.push(item.value);
          next = item.next;
        }
        return { value: items, next };
      }
      default:
        throw new RespProtocolError(
          `unexpected RESP type byte 0x${(type ?? 0).toString(16)} (RESP3 is not supported)`,
        );
    }
  }
}

export type RespTarget = { host?: string; port: number } | { path: string };

export interface RespConnectOptions {
  /** Give up connecting after this many milliseconds. Default 5000. */
  connectTimeoutMs?: number;
}

interface Pending {
  resolve: (value: RespValue) => void;
  reject: (error: Error) => void;
}

/** One RESP2 connection. Replies are matched to commands in order (pipelining is free). */
export class RespClient {
  private readonly parser = new RespParser();
  private readonly pending: Pending[] = [];
  private closeError: Error | undefined;
  /** Resolves once the socket is closed, for whatever reason. */
  readonly closed: Promise<void>;

  constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", (error) => this.fail(error));
    this.closed = new Promise((resolve) => {
      socket.once("close", () => {
        this.fail(new Error("redis connection closed"));
        resolve();
      });
    });
  }

  /** True once the connection can no longer be used. */
  get isClosed(): boolean {
    return this.closeError !== undefined || this.socket.destroyed;
  }

  /** Sends one command. Resolves with the reply (a `RespError` for an error reply). */
  send(args: readonly RespArg[]): Promise<RespValue> {
    return this.enqueue([args])[0] as Promise<RespValue>;
  }

  /** Sends every command in one write and resolves with their replies, in order. */
  pipeline(commands: readonly (readonly RespArg[])[]): Promise<RespValue[]> {
    return Promise.all(this.enqueue(commands));
  }

  /** Sends a command and throws if Redis answers with an error reply. */
  async call(...args: RespArg[]): Promise<Exclude<RespValue, RespError>> {
    const reply = await this.send(args);
    if (reply instanceof RespError) throw reply;
    return reply;
  }

  /** Closes gracefully: pending replies still arrive. */
  async close(): Promise<void> {
    if (!this.socket.destroyed) this.socket.end();
    await this.closed;
  }

  /** Closes at once; pending commands reject. */
  destroy(error?: Error): void {
    this.fail(error ?? new Error("redis connection destroyed"));
    this.socket.destroy();
  }

  private enqueue(commands: readonly (readonly RespArg[])[]): Promise<RespValue>[] {
    if (this.closeError !== undefined) {
      const error = this.closeError;
      return commands.map(() => Promise.reject(error));
    }
    const promises = commands.map(
      () => new Promise<RespValue>((resolve, reject) => this.pending.push({ resolve, reject })),
    );
    this.socket.write(Buffer.concat(commands.map((c) => encodeCommand(c))));
    return promises;
  }

  private onData(chunk: Buffer): void {
    let replies: RespValue[];
    try {
      replies = this.parser.push(chunk);
    } catch (error) {
      this.destroy(error as Error);
      return;
    }
    for (const reply of replies) {
      const waiter = this.pending.shift();
      if (waiter === undefined) {
        this.destroy(new RespProtocolError("received a reply no command asked for"));
        return;
      }
      waiter.resolve(reply);
    }
  }

  private fail(error: Error): void {
    this.closeError ??= error;
    for (const waiter of this.pending.splice(0)) waiter.reject(error);
  }
}

/** Opens a RESP2 connection to a TCP address or a unix socket. */
export function connectResp(target: RespTarget, options: RespConnectOptions = {}): Promise<RespClient> {
  const timeoutMs = options.connectTimeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const socket = "path" in target
      ? net.connect({ path: target.path })
      : net.connect({ host: target.host ?? "127.0.0.1", port: target.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connecting to redis timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      resolve(new RespClient(socket));
    });
  });
}

/** Decodes a reply to JS text for assertions: Buffers become UTF-8 strings, recursively. */
export function replyToText(value: RespValue): unknown {
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  if (Array.isArray(value)) return value.map(replyToText);
  return value;
}
