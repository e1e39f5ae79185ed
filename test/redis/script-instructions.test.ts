/**
 * The decision scripts' cost inside Redis stays what bench/README.md reports: a private
 * redis-server under valgrind's callgrind counts the machine instructions of each script call
 * (only inside evalShaCommand: counted, not timed, so the machine's load cannot move them; a
 * count repeats within ≈ 0.2 %), and INFO commandstats counts the Redis commands per call
 * (exactly). A script that costs more than 5 % over the figure recorded in
 * bench/redis-instructions.json, or makes more commands, fails until the record and the report
 * are updated together: `node --import tsx bench/redis.ts --instructions --record`, then the
 * table "Instructions inside Redis per script call" in bench/README.md (every recorded figure
 * must appear there).
 *
 * Instruction counts belong to one redis-server build: on another version than the record's,
 * only the commands are compared.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as core from "../../packages/core/src/index.ts";
import {
  COUNTED_IDS,
  COUNTING,
  FIRST_DB,
  type InstructionRecord,
  instructionSubjects,
  RECORD_FILE,
  SUBJECT_NAMES,
} from "../../bench/redis-subjects.ts";
import { callgrindAvailable, type CallgrindRedis, startCallgrindRedis } from "../support/redis-callgrind.ts";

const VALGRIND_MISSING =
  "valgrind is required for the Redis script instruction check but was not found on PATH; install it with `apt-get install -y valgrind`";
const GROWTH = 1.05;
const record = JSON.parse(readFileSync(RECORD_FILE, "utf8")) as InstructionRecord;
const report = readFileSync(new URL("../../bench/README.md", import.meta.url), "utf8");

describe("Redis scripts: instructions and commands per decision, against the recorded figures", () => {
  let cg: CallgrindRedis;
  let subjects: ReturnType<typeof instructionSubjects>;
  beforeAll(async () => {
    if (!callgrindAvailable()) throw new Error(VALGRIND_MISSING);
    cg = await startCallgrindRedis();
    // The databases the bench counts the working tree's subjects in (see bench/redis-subjects.ts).
    const clients = [];
    for (let i = 0; i < SUBJECT_NAMES.length; i++) clients.push(await cg.connect(FIRST_DB + i));
    subjects = instructionSubjects(core, clients);
  }, 30_000);
  afterAll(() => cg?.stop());

  it("the record was counted the way this test counts, and the report shows every recorded figure", () => {
    expect(record.counting).toEqual(COUNTING);
    for (const [name, figures] of Object.entries(record.scripts)) {
      expect(report, `bench/README.md shows ${name}'s ${figures.instructions}`).toContain(figures.instructions.toLocaleString("en-US"));
    }
  });

  it("every script measured is recorded", () => {
    expect(Object.keys(record.scripts).sort()).toEqual([...SUBJECT_NAMES].sort());
  });

  it.each(SUBJECT_NAMES)("%s: at most 5 % more instructions than recorded, no more commands", async (name) => {
    const [, decide] = subjects.find(([n]) => n === name)!;
    const counted = await cg.count(decide, COUNTED_IDS, COUNTING.decisions, COUNTING.warmUp);
    const recorded = record.scripts[name]!;
    const update = "if intended, run `node --import tsx bench/redis.ts --instructions --record` and update bench/README.md";
    for (const [command, calls] of Object.entries(counted.commands)) {
      expect(calls, `${name}: ${command} per decision (recorded ${recorded.commands[command] ?? 0}); ${update}`).toBeLessThanOrEqual(
        recorded.commands[command] ?? 0,
      );
    }
    console.log(`${name}: ${counted.instructions} instructions per call (recorded ${recorded.instructions})`);
    if (cg.version !== record.redis) {
      console.log(`${name}: redis-server ${cg.version}, recorded on ${record.redis}: instructions not compared (${counted.instructions})`);
      return;
    }
    expect(
      counted.instructions,
      `${name}: ${counted.instructions} instructions per call, recorded ${recorded.instructions} (limit ${GROWTH}×); ${update}`,
    ).toBeLessThanOrEqual(recorded.instructions * GROWTH);
  }, 120_000);
});
