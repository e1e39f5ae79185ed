/**
 * What a clock skew between instances costs on DynamoDB, which has no clock to offer: two
 * instances share a key under steady traffic (each asks once per simulated second for 5
 * minutes, on injected clocks) while one instance's clock runs ahead by 5 s or 30 s. Measured
 * per kind: admissions in total and the most admitted in any one window of true time, against
 * one clock (the reference). The figures are printed for docs/aws-lambda-and-dynamodb.md; the
 * assertions hold the bound the algorithms give: each keeps its own anchors (a window's start,
 * a bucket's arrival time, a log's entries), so an instance that lags never reopens what one
 * ahead of it closed, and a skew of δ shifts the schedule by at most δ: a window of true time
 * admits at most what `W + δ` of the reference's timeline admits.
 */
import { createTable, dynamoDBStore } from "@floodgate/dynamodb";
import { createRateLimiter } from "@floodgate/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { example, KINDS } from "../support/kinds.ts";
import { uniquePrefix } from "../stores/store-contract.ts";
import { type Dynalite, startDynalite } from "./dynalite.ts";

const T0 = 1_700_002_800_000; // on an hour
const WINDOW_MS = 60_000;
const LIMIT = 10;
const SKEWS_MS = [5_000, 30_000] as const;
const STEPS = 300; // one request per instance per simulated second: 5 minutes

let server: Dynalite;
beforeAll(async () => {
  server = await startDynalite();
  await createTable(server.client(), { table: "skew" });
});
afterAll(() => server?.stop());

/** Admission times (true ms) of two instances whose clocks are `skews` ahead of true time. */
async function run(kind: (typeof KINDS)[number], skews: [number, number]): Promise<number[]> {
  let now = T0;
  const prefix = uniquePrefix();
  const limiters = skews.map((skew) =>
    createRateLimiter({
      policy: example(kind, LIMIT, WINDOW_MS),
      store: dynamoDBStore({ client: server.client(), table: "skew" }),
      prefix,
      clock: () => now + skew,
      resilience: false,
    })
  );
  const admitted: number[] = [];
  for (let s = 0; s < STEPS; s++) {
    now = T0 + s * 1000;
    for (const limiter of s % 2 === 0 ? limiters : [...limiters].reverse()) if ((await limiter.limit("k")).allowed) admitted.push(now);
  }
  return admitted;
}

/** The most admissions within any `span` ms of true time. */
function mostWithin(times: number[], span: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! >= span) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe(`clock skew between two instances, ${LIMIT} per ${WINDOW_MS / 1000} s`, () => {
  const rows: string[] = [];
  afterAll(() => {
    console.log(
      [
        "| kind | one clock: total / most in a window | one clock 5 s ahead | one clock 30 s ahead |",
        "| --- | --- | --- | --- |",
        ...rows,
      ].join("\n"),
    );
  });

  it.each(KINDS)("%s", async (kind) => {
    const reference = await run(kind, [0, 0]);
    const cell = (t: number[]) => `${t.length} / ${mostWithin(t, WINDOW_MS)}`;
    const cells = [cell(reference)];
    for (const skew of SKEWS_MS) {
      const skewed = await run(kind, [0, skew]);
      cells.push(cell(skewed));
      // The bound: a true window admits at most what W + δ of the one-clock timeline admits.
      expect(mostWithin(skewed, WINDOW_MS)).toBeLessThanOrEqual(mostWithin(reference, WINDOW_MS + skew));
      expect(skewed.length).toBeLessThanOrEqual(reference.length + Math.ceil((skew / WINDOW_MS) * LIMIT) + LIMIT);
    }
    rows.push(`| ${kind} | ${cells.join(" | ")} |`);
  }, 240_000);
});
