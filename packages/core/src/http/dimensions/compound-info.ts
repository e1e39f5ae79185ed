import type { CompoundDecision, DimensionDecision } from "../../compound/types.ts";
import { RequestRateLimitInfo } from "../result.ts";

/**
 * The decision info of a rule with `dimensions`: a request's info, plus the binding dimension and
 * every dimension's figures (the compound decision's), in `toJSON()` too.
 */
export class CompoundRateLimitInfo extends RequestRateLimitInfo {
  get #compound(): CompoundDecision | undefined {
    return this.decision as unknown as CompoundDecision | undefined;
  }

  /** The binding dimension's name; `undefined` when no store answered. */
  get dimension(): string | undefined {
    return this.#compound?.dimension;
  }

  /** Every dimension's key and figures, by name; `undefined` when no store answered. */
  get dimensions(): Readonly<Record<string, DimensionDecision>> | undefined {
    return this.#compound?.dimensions;
  }

  override toJSON(): object {
    return { ...super.toJSON(), dimension: this.dimension, dimensions: this.dimensions };
  }
}
