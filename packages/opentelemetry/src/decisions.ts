import type { Attributes, Counter, Histogram, Span } from "@opentelemetry/api";
import type { RateLimitInfo } from "@floodgate/core/http";
import { ATTRIBUTES as A } from "./names.ts";

// One decision into the metrics and the active span. Attributes are built once per (rule, policy,
// outcome, source, store, key group) and kept: a decision allocates nothing for its metrics.

/** What a decision came to, as the `floodgate.decision.outcome` attribute says it. */
export type Outcome = "allowed" | "limited" | "deny_listed" | "skipped" | "shadow_limited";

const OUTCOMES: Readonly<Record<string, Outcome>> = {
  allowed: "allowed",
  limited: "limited",
  denyList: "deny_listed",
  shadowLimited: "shadow_limited",
};

const SOURCES: Readonly<Record<string, string>> = { cache: "deny_cache" };

/** Made attributes of one (rule, policy), by slot; with a key group, by slot and group. */
type Slots = (Attributes | undefined)[] & { groups?: Map<string, Attributes> };
const OUTCOME_SLOT: Readonly<Record<Outcome, number>> = { allowed: 0, limited: 1, deny_listed: 2, skipped: 3, shadow_limited: 4 };
// Slot 0: no source; the last: a source this version does not know.
const SOURCE_SLOT: Readonly<Record<string, number>> = { store: 1, deny_cache: 2, lease: 3, fallback: 4, allow: 5, deny: 6 };
const SOURCE_SLOTS = 8;

/** The decision's outcome: `info.outcome` where the HTTP layer gives one, else derived from its source and figures. */
export function outcomeOf(info: RateLimitInfo): Outcome {
  const given = (info as { outcome?: string }).outcome;
  if (given !== undefined) return OUTCOMES[given] ?? (info.allowed ? "allowed" : "limited");
  if (info.source === "denyList") return "deny_listed";
  return info.allowed ? "allowed" : "limited";
}

/** What a recorder writes to. */
export interface DecisionInstruments {
  readonly decisions: Counter;
  readonly duration: Histogram;
  readonly warnings: Counter;
}

/** A policy warning as the HTTP layer reports it, where it does. */
interface Warned {
  readonly policy: string;
}

/** Records decisions; `storeOf(rule)` names the store a rule counts in. */
export class DecisionRecorder {
  readonly #byRule = new Map<string, Map<string, Slots>>();
  readonly #cache = new Map<string, Attributes>();
  readonly #warnings = new Map<string, Attributes>();

  constructor(
    readonly instruments: DecisionInstruments,
    readonly storeOf: (rule: string) => string | undefined,
    readonly keyGroup: ((key: string) => string | undefined) | undefined,
  ) {}

  /** The attributes of one kind of decision, made once: looked up by rule, policy, then a slot per (outcome, source). */
  attributes(rule: string, policy: string, outcome: Outcome, source: string | undefined, group: string | undefined): Attributes {
    let byPolicy = this.#byRule.get(rule);
    if (byPolicy === undefined) this.#byRule.set(rule, byPolicy = new Map());
    let slots = byPolicy.get(policy);
    if (slots === undefined) byPolicy.set(policy, slots = []);
    const slot = OUTCOME_SLOT[outcome] * SOURCE_SLOTS + (source === undefined ? 0 : SOURCE_SLOT[source] ?? SOURCE_SLOTS - 1);
    if (group !== undefined) return this.#grouped(slots, slot, rule, policy, outcome, source, group);
    return slots[slot] ??= this.#make(rule, policy, outcome, source, undefined);
  }

  #grouped(
    slots: Slots,
    slot: number,
    rule: string,
    policy: string,
    outcome: Outcome,
    source: string | undefined,
    group: string,
  ): Attributes {
    const groups = slots.groups ??= new Map();
    let attributes = groups.get(`${slot}\u0000${group}`);
    if (attributes === undefined) groups.set(`${slot}\u0000${group}`, attributes = this.#make(rule, policy, outcome, source, group));
    return attributes;
  }

  #make(rule: string, policy: string, outcome: Outcome, source: string | undefined, group: string | undefined): Attributes {
    const made: Attributes = { [A.rule]: rule };
    if (policy !== "") made[A.policy] = policy;
    made[A.outcome] = outcome;
    if (source !== undefined) {
      made[A.source] = source;
      const store = this.storeOf(rule);
      if (store !== undefined) made[A.store] = store;
    }
    if (group !== undefined) made[A.keyGroup] = group;
    return Object.freeze(made);
  }

  /** One decision: the counter, the duration since `startedAt` (ms, `performance.now()`; none when undefined), the span. */
  record(info: RateLimitInfo, startedAt: number | undefined, span: Span | undefined): void {
    const outcome = outcomeOf(info);
    const source = outcome === "deny_listed" ? undefined : SOURCES[info.source] ?? info.source;
    const group = this.keyGroup === undefined ? undefined : groupOf(this.keyGroup, info.key);
    const attributes = this.attributes(info.rule, info.policy, outcome, source, group);
    this.instruments.decisions.add(1, attributes);
    if (startedAt !== undefined) this.instruments.duration.record((performance.now() - startedAt) / 1000, attributes);
    const warned = (info as { warnings?: readonly Warned[] }).warnings;
    if (warned !== undefined && warned.length > 0) {
      for (const warning of warned) this.instruments.warnings.add(1, this.#warned(info.rule, warning.policy));
    }
    if (span !== undefined && span.isRecording()) {
      span.setAttributes(attributes);
      span.setAttribute(A.remaining, info.remaining);
      span.setAttribute(A.retryAfter, info.retryAfterMs === Infinity ? -1 : info.retryAfterMs / 1000);
      const shadow = (info as { shadowPolicy?: string }).shadowPolicy;
      if (shadow !== undefined) span.setAttribute(A.shadowPolicy, shadow);
    }
  }

  /** A skipped request: counted with its reason, under no rule. */
  skipped(reason: string, startedAt: number | undefined): void {
    const attributes = this.#skipped(reason);
    this.instruments.decisions.add(1, attributes);
    if (startedAt !== undefined) this.instruments.duration.record((performance.now() - startedAt) / 1000, attributes);
  }

  #skipped(reason: string): Attributes {
    const id = `skipped\u0000${reason}`;
    let attributes = this.#cache.get(id);
    if (attributes === undefined) {
      this.#cache.set(id, attributes = Object.freeze({ [A.outcome]: "skipped", [A.skipReason]: reason }));
    }
    return attributes;
  }

  #warned(rule: string, policy: string): Attributes {
    const id = `${rule}\u0000${policy}`;
    let attributes = this.#warnings.get(id);
    if (attributes === undefined) this.#warnings.set(id, attributes = Object.freeze({ [A.rule]: rule, [A.policy]: policy }));
    return attributes;
  }
}

/** The key's group; a function that throws or returns something else than a string gives none. */
function groupOf(keyGroup: (key: string) => string | undefined, key: string): string | undefined {
  try {
    const group = keyGroup(key);
    return typeof group === "string" ? group : undefined;
  } catch {
    return undefined;
  }
}
