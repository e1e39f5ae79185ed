import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisInstance, startRedis } from "../support/redis-server.ts";
import {
  connectResp,
  encodeCommand,
  replyToText,
  type RespClient,
  RespError,
  RespParser,
  RespProtocolError,
  type RespValue,
} from "../../packages/upstash-local/src/resp.ts";

/** One stream holding every reply type, nested arrays and awkward bulk contents. */
const STREAM = Buffer.concat([
  Buffer.from("+OK\r\n"),
  Buffer.from("-ERR wrong number of arguments\r\n"),
  Buffer.from(":-42\r\n"),
  Buffer.from(":1234567890\r\n"),
  Buffer.from("$5\r\nab\r\nc\r\n"), // a bulk string holding CRLF
  Buffer.from("$0\r\n\r\n"),
  Buffer.from("$-1\r\n"),
  Buffer.from("*-1\r\n"),
  Buffer.from("*0\r\n"),
  Buffer.from("*3\r\n:1\r\n*2\r\n$1\r\na\r\n*2\r\n+PONG\r\n$-1\r\n-NOSCRIPT nope\r\n"),
  Buffer.from("$3\r\n"),
  Buffer.from([0xff, 0x00, 0xfe]),
  Buffer.from("\r\n"),
]);

function expectStream(replies: RespValue[]): void {
  expect(replies).toHaveLength(11);
  expect(replies[0]).toEqual(Buffer.from("OK"));
  expect(replies[1]).toBeInstanceOf(RespError);
  expect((replies[1] as RespError).message).toBe("ERR wrong number of arguments");
  expect(replies[2]).toBe(-42);
  expect(replies[3]).toBe(1234567890);
  expect(replies[4]).toEqual(Buffer.from("ab\r\nc"));
  expect(replies[5]).toEqual(Buffer.alloc(0));
  expect(replies[6]).toBeNull();
  expect(replies[7]).toBeNull();
  expect(replies[8]).toEqual([]);
  const nested = replies[9] as RespValue[];
  expect(nested[0]).toBe(1);
  expect(nested[1]).toEqual([Buffer.from("a"), [Buffer.from("PONG"), null]]);
  expect(nested[2]).toBeInstanceOf(RespError);
  expect((nested[2] as RespError).message).toBe("NOSCRIPT nope");
  expect(replies[10]).toEqual(Buffer.from([0xff, 0x00, 0xfe]));
}

describe("RESP2 parser", () => {
  it("parses every reply type, nested arrays and errors as values", () => {
    const parser = new RespParser();
    const replies = parser.push(STREAM);
    expectStream(replies);
    expect(parser.pendingBytes).toBe(0);
  });

  it("reassembles the stream split in two at every byte", () => {
    for (let cut = 1; cut < STREAM.length; cut++) {
      const parser = new RespParser();
      const replies = [...parser.push(STREAM.subarray(0, cut)), ...parser.push(STREAM.subarray(cut))];
      expect(replies, `cut at ${cut}`).toHaveLength(11);
      expectStream(replies);
      expect(parser.pendingBytes).toBe(0);
    }
  });

  it("reassembles the stream fed one byte at a time, and holds back incomplete replies", () => {
    const parser = new RespParser();
    const replies: RespValue[] = [];
    for (let i = 0; i < STREAM.length; i++) {
      const got = parser.push(STREAM.subarray(i, i + 1));
      // A reply only ever completes on its own last byte, the LF of its final CRLF.
      if (got.length > 0) expect(STREAM[i]).toBe(0x0a);
      expect(got.length).toBeLessThanOrEqual(1);
      replies.push(...got);
    }
    expectStream(replies);
  });

  it("does not return a nested array until its last element has arrived", () => {
    const parser = new RespParser();
    expect(parser.push(Buffer.from("*2\r\n*1\r\n$3\r\nfoo\r\n$3\r\nba"))).toEqual([]);
    expect(parser.pendingBytes).toBeGreaterThan(0);
    expect(parser.push(Buffer.from("r\r\n"))).toEqual([[[Buffer.from("foo")], Buffer.from("bar")]]);
  });

  it("rejects RESP3 and garbage type bytes", () => {
    expect(() => new RespParser().push(Buffer.from("%1\r\n+a\r\n+b\r\n"))).toThrow(RespProtocolError);
    expect(() => new RespParser().push(Buffer.from("x\r\n"))).toThrow(RespProtocolError);
    expect(() => new RespParser().push(Buffer.from("$3\r\nabcXY"))).toThrow(RespProtocolError);
    expect(() => new RespParser().push(Buffer.from(":12a\r\n"))).toThrow(RespProtocolError);
  });

  it("encodes commands as arrays of bulk strings, Buffers byte for byte", () => {
    expect(encodeCommand(["SET", "k", 1.5]).toString()).toBe("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n1.5\r\n");
    expect(encodeCommand(["é"]).toString("latin1")).toBe("*1\r\n$2\r\nÃ©\r\n");
    expect(encodeCommand([Buffer.from([0xff, 0x0d, 0x0a])])).toEqual(
      Buffer.concat([Buffer.from("*1\r\n$3\r\n"), Buffer.from([0xff, 0x0d, 0x0a]), Buffer.from("\r\n")]),
    );
  });
});

describe("RESP2 client over TCP, against a server that splits every reply", () => {
  const CANNED_REPLY = Buffer.from("*2\r\n+PONG\r\n*2\r\n$5\r\nhello\r\n:7\r\n");
  let server: net.Server;
  let port = 0;
  let chunksWritten = 0;

  beforeAll(async () => {
    // Answers each complete command with a canned nested reply, written one byte per write,
    // each write on its own event-loop turn, so the client sees many small TCP segments.
    server = net.createServer((socket) => {
      socket.setNoDelay(true);
      socket.on("error", () => undefined);
      let buffered = "";
      let writing = Promise.resolve();
      const answer = async (count: number): Promise<void> => {
        for (let n = 0; n < count; n++) {
          for (const byte of CANNED_REPLY) {
            if (socket.destroyed) return;
            socket.write(Buffer.from([byte]));
            chunksWritten++;
            await new Promise((resolve) => setImmediate(resolve));
          }
        }
      };
      socket.on("data", (chunk: Buffer) => {
        const parts = (buffered + chunk.toString()).split("*1\r\n$4\r\nPING\r\n");
        buffered = parts.pop() ?? "";
        writing = writing.then(() => answer(parts.length));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it("assembles replies that arrive in many TCP chunks, in order, pipelined", async () => {
    const client = await connectResp({ host: "127.0.0.1", port });
    try {
      const replies = await client.pipeline([["PING"], ["PING"], ["PING"]]);
      expect(replies.map(replyToText)).toEqual([
        ["PONG", ["hello", 7]],
        ["PONG", ["hello", 7]],
        ["PONG", ["hello", 7]],
      ]);
      expect(chunksWritten).toBe(3 * CANNED_REPLY.length);
    } finally {
      await client.close();
    }
  });

  it("rejects pending commands when the connection drops", async () => {
    const client = await connectResp({ host: "127.0.0.1", port });
    const pending = client.send(["NOT-PING"]);
    client.destroy();
    await expect(pending).rejects.toThrow(/destroyed/);
    await expect(client.send(["PING"])).rejects.toThrow();
    expect(client.isClosed).toBe(true);
  });
});

describe("RESP2 client against a real redis-server", () => {
  let redis: RedisInstance;
  let socketRedis: RedisInstance;
  let client: RespClient;

  beforeAll(async () => {
    [redis, socketRedis] = await Promise.all([startRedis(), startRedis({ unixSocket: true })]);
    client = await connectResp(redis.target);
  }, 30_000);

  afterAll(async () => {
    client?.destroy();
    await Promise.all([redis?.stop(), socketRedis?.stop()]);
  });

  it("pipelines 2000 commands and matches every reply to its command", async () => {
    const commands = Array.from({ length: 1000 }, (_, i) => [["SET", `p:${i}`, `v${i}`], ["GET", `p:${i}`]]).flat();
    const replies = await client.pipeline(commands);
    expect(replies).toHaveLength(2000);
    for (let i = 0; i < 1000; i++) {
      expect(replies[2 * i]).toEqual(Buffer.from("OK"));
      expect(replies[2 * i + 1]).toEqual(Buffer.from(`v${i}`));
    }
  });

  it("round-trips a 5 MB binary value (many TCP chunks) byte for byte", async () => {
    const value = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < value.length; i++) value[i] = (i * 31 + 7) & 0xff;
    expect(await client.send(["SET", "big", value])).toEqual(Buffer.from("OK"));
    const [got, length] = await client.pipeline([["GET", "big"], ["STRLEN", "big"]]);
    expect(length).toBe(value.length);
    expect(Buffer.compare(got as Buffer, value)).toBe(0);
  });

  it("returns error replies as values in the middle of a pipeline", async () => {
    const replies = await client.pipeline([["SET", "s", "x"], ["INCR", "s"], ["GET", "s"], ["NOPE"]]);
    expect(replies[0]).toEqual(Buffer.from("OK"));
    expect(replies[1]).toBeInstanceOf(RespError);
    expect((replies[1] as RespError).message).toMatch(/^ERR value is not an integer/);
    expect(replies[2]).toEqual(Buffer.from("x"));
    expect((replies[3] as RespError).message).toMatch(/^ERR unknown command/);
    await expect(client.call("INCR", "s")).rejects.toBeInstanceOf(RespError);
  });

  it("parses nested replies from Lua and nil inside arrays", async () => {
    const reply = await client.send(["EVAL", "return {1, {'a', {'OK', false}}, redis.status_reply('PONG')}", "0"]);
    expect(replyToText(reply)).toEqual([1, ["a", ["OK", null]], "PONG"]);
  });

  it("connects over a unix socket", async () => {
    const socketClient = await connectResp(socketRedis.target);
    try {
      expect(replyToText(await socketClient.send(["PING"]))).toBe("PONG");
      expect(replyToText(await socketClient.send(["CONFIG", "GET", "port"]))).toEqual(["port", "0"]);
    } finally {
      await socketClient.close();
    }
  });
});
