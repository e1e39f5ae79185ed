/**
 * DynamoDB store benchmark (a harness, not a timed test). Run: `npm run bench:dynamodb`
 * (node --import tsx bench/dynamodb.ts [--decisions 400] [--rounds 3]).
 *
 * Starts dynalite (npm, an implementation of the DynamoDB API, with what it lacks added as
 * DynamoDB documents it: test/dynamodb/fixtures/dynalite-server.cjs) on a free loopback port,
 * then measures on that one server, per subject:
 *  - requests and capacity units per decision: every client counts the commands it sends and
 *    adds `ReturnConsumedCapacity: "TOTAL"` to each, so both libraries' capacity is read the same
 *    way (dynalite charges a failed conditional write nothing; DynamoDB charges it a write unit);
 *  - decisions/s with 1 caller and with 64 concurrent callers, all on one key (a shared quota:
 *    where instances meet), limit 1e6 per hour so that every decision admits;
 *  - over-admission: 64 concurrent callers × 5 calls on one key with a limit of 100.
 * Subjects: the floor (one unconditional `PutItem` of a small item per decision, through the same
 * kind of client: the round trip no store that writes per decision can beat), Floodgate's
 * `dynamoDBStore` in exact mode and in leased mode (sliding window), and rate-limiter-flexible's
 * `RateLimiterDynamo` (a fixed window of `points` per `duration`).
 * Concurrency c = c loops each awaiting one decision at a time. Each figure is the median of
 * `--rounds` rounds, subjects interleaved within a round.
 */
import { DynamoDB, DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { createRateLimiter, slidingWindow } from "@floodgate/core";
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { RateLimiterDynamo } from "rate-limiter-flexible";
import { startDynalite } from "../test/dynamodb/dynalite.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const DECISIONS = arg("decisions", 400);
const ROUNDS = arg("rounds", 3);

const server = await startDynalite();
await createTable(server.client(), { table: "bench-floodgate" });

/** Commands a client sent and the capacity DynamoDB reported for them. */
interface Counted {
  requests: number;
  capacity: number;
}
function counting<C extends DynamoDBClient>(client: C): C & { counted: Counted } {
  const counted: Counted = { requests: 0, capacity: 0 };
  client.middlewareStack.add(
    (next) => async (args) => {
      counted.requests++;
      (args.input as Record<string, unknown>)["ReturnConsumedCapacity"] ??= "TOTAL";
      try {
        const out = await next(args);
        counted.capacity += (out.output as { ConsumedCapacity?: { CapacityUnits?: number } }).ConsumedCapacity?.CapacityUnits ?? 0;
        return out;
      } catch (error) {
        throw error;
      }
    },
    { step: "initialize", name: "benchCounting" },
  );
  return Object.assign(client, { counted });
}
const clientOptions = {
  endpoint: server.endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" },
  requestHandler: { httpAgent: { keepAlive: true, maxSockets: 256 } },
};

type Decide = (key: string) => Promise<boolean>;
interface Subject {
  name: string;
  client: { counted: Counted };
  /** A fresh limiter (a fresh instance) of `limit` per hour. */
  make(limit: number): Promise<{ decide: Decide; flush(): Promise<void> }>;
}

const floodgate = (mode: "exact" | "leased"): Subject => {
  const client = counting(new DynamoDBClient(clientOptions));
  return {
    name: `Floodgate dynamoDBStore, ${mode}`,
    client,
    async make(limit) {
      const limiter = createRateLimiter({
        policy: slidingWindow({ limit, window: "1h" }),
        store: dynamoDBStore({ client, table: "bench-floodgate" }),
        prefix: `b${Math.random().toString(36).slice(2)}:`,
        mode,
        resilience: false,
      });
      return {
        decide: async (key) => {
          const d = await limiter.limit(key);
          await d.pending;
          return d.allowed;
        },
        flush: () => limiter.flush(),
      };
    },
  };
};

let rlfTable = 0;
const rlf: Subject = (() => {
  const client = counting(new DynamoDB(clientOptions));
  return {
    name: "rate-limiter-flexible RateLimiterDynamo",
    client,
    async make(limit) {
      const tableName = `bench-rlf-${++rlfTable}`;
      const limiter = await new Promise<RateLimiterDynamo>((resolve, reject) => {
        const l: RateLimiterDynamo = new RateLimiterDynamo(
          { storeClient: client, tableName, points: limit, duration: 3600 },
          (error?: unknown) => (error ? reject(error) : resolve(l)),
        );
      });
      return {
        decide: (key) => limiter.consume(key).then(() => true, (r: unknown) => (r instanceof Error ? Promise.reject(r) : false)),
        flush: async () => {},
      };
    },
  };
})();

const floor: Subject = (() => {
  const client = counting(new DynamoDBClient(clientOptions));
  return {
    name: "floor: one PutItem, no condition",
    client,
    async make() {
      return {
        decide: async (key) => {
          await client.send(new PutItemCommand({ TableName: "bench-floodgate", Item: { pk: { S: `floor{${key}}` }, v: { S: "1" } } }));
          return true;
        },
        flush: async () => {},
      };
    },
  };
})();

const subjects = [floor, floodgate("exact"), floodgate("leased"), rlf];

async function throughput(subject: Subject, callers: number): Promise<{ perSecond: number; requests: number; capacity: number }> {
  const { decide, flush } = await subject.make(1_000_000);
  await decide("hot"); // the item exists, the instance has seen it
  const before = { ...subject.client.counted };
  const started = performance.now();
  const each = Math.ceil(DECISIONS / callers);
  await Promise.all(Array.from({ length: callers }, async () => {
    for (let i = 0; i < each; i++) await decide("hot");
  }));
  const seconds = (performance.now() - started) / 1000;
  await flush();
  const n = each * callers;
  return {
    perSecond: n / seconds,
    requests: (subject.client.counted.requests - before.requests) / n,
    capacity: (subject.client.counted.capacity - before.capacity) / n,
  };
}

async function overAdmission(subject: Subject): Promise<number | string> {
  if (subject === floor) return "n/a";
  const { decide, flush } = await subject.make(100);
  let admitted = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    for (let i = 0; i < 5; i++) if (await decide("limited")) admitted++;
  }));
  await flush();
  return admitted;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results = new Map<
  string,
  { c1: number[]; c64: number[]; req1: number[]; cap1: number[]; req64: number[]; cap64: number[]; over: (number | string)[] }
>();
for (const s of subjects) results.set(s.name, { c1: [], c64: [], req1: [], cap1: [], req64: [], cap64: [], over: [] });
for (let round = 0; round < ROUNDS; round++) {
  for (const s of subjects) {
    const r = results.get(s.name)!;
    const one = await throughput(s, 1);
    const many = await throughput(s, 64);
    r.c1.push(one.perSecond);
    r.req1.push(one.requests);
    r.cap1.push(one.capacity);
    r.c64.push(many.perSecond);
    r.req64.push(many.requests);
    r.cap64.push(many.capacity);
    r.over.push(await overAdmission(s));
  }
}
const load = (await import("node:os")).loadavg()[0]!.toFixed(1);
console.log(
  `dynalite on 127.0.0.1, ${DECISIONS} decisions per subject and concurrency, median of ${ROUNDS} rounds, load average ${load}\n`,
);
console.log(
  "| subject | requests / decision (c=1) | capacity units / decision (c=1) | requests / decision (c=64) | capacity units / decision (c=64) | decisions/s c=1 | decisions/s c=64 | admitted of 320 calls, limit 100 |",
);
console.log("| --- | --: | --: | --: | --: | --: | --: | --: |");
for (const [name, r] of results) {
  console.log(
    `| ${name} | ${median(r.req1).toFixed(2)} | ${median(r.cap1).toFixed(2)} | ${median(r.req64).toFixed(2)} | ${
      median(r.cap64).toFixed(2)
    } | ${median(r.c1).toFixed(0)} | ${median(r.c64).toFixed(0)} | ${r.over.join(", ")} |`,
  );
}
await server.stop();
process.exit(0);
