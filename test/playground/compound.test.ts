/**
 * The playground's compound panel, in Node: the requests through withRateLimit with a rule over
 * user, organisation and service, each refused request charging none of them.
 */
import { describe, expect, it } from "vitest";
import { compoundRun, DEFAULT_LIMITS, DEFAULT_REQUESTS, parseRequests } from "../../docs/playground/compound.ts";

describe("playground compound panel", () => {
  it("the default requests: alice bound by her own limit, bob by acme's, dave by the service's", async () => {
    const rows = await compoundRun(DEFAULT_LIMITS, parseRequests(DEFAULT_REQUESTS));
    const seen = rows.map((r) => [`${r.user}@${r.org}`, r.status, r.dimension, r.left.user, r.left.org, r.left.global]);
    expect(seen).toEqual([
      ["alice@acme", 200, "user", 2, 4, 7],
      ["alice@acme", 200, "user", 1, 3, 6],
      ["alice@acme", 200, "user", 0, 2, 5],
      // Refused by alice's limit: acme and the service keep what they had.
      ["alice@acme", 429, "user", 0, 2, 5],
      ["bob@acme", 200, "org", 2, 1, 4],
      ["bob@acme", 200, "org", 1, 0, 3],
      ["bob@acme", 429, "org", 1, 0, 3],
      // On a tie the first dimension named binds.
      ["carol@globex", 200, "user", 2, 4, 2],
      ["carol@globex", 200, "user", 1, 3, 1],
      ["carol@globex", 200, "user", 0, 2, 0],
      ["dave@initech", 429, "global", 3, 5, 0],
      ["dave@initech", 429, "global", 3, 5, 0],
    ]);
    expect(rows[3]!.header).toMatch(/^"user";r=0;t=\d+, "org";r=2;t=\d+, "global";r=5;t=\d+$/);
  });

  it("reads user@org ×count, and names what it cannot read", () => {
    expect(parseRequests("a@x ×2, b@y")).toEqual([{ user: "a", org: "x" }, { user: "a", org: "x" }, { user: "b", org: "y" }]);
    expect(() => parseRequests("a@x, nobody")).toThrow('"nobody" is not user@org');
  });
});
