import { NODE_HEADER_NAMES } from "./headers.ts";
import type { RateLimitResult } from "./result.ts";

// How an adapter on Node's HTTP server follows one request from before its decision to its end:
// the close of the response is watched from the start (a client that leaves while the store
// decides is seen), and what the request holds is given back at the later of the handler's end
// and the response's close.

/** The part of Node's `ServerResponse` that settlements need; duck-typed so core imports no `node:*`. */
export interface NodeResponseLike {
  /** The status sent (or about to be). */
  readonly statusCode: number;
  /** `false` when the connection closed before the response was completely sent. */
  readonly writableFinished?: boolean;
  /**
   * `true` once the response is closed or destroyed (Node sets it as it emits `close`). A
   * response that has it is watched only when its request has something to settle.
   */
  readonly destroyed?: boolean;
  /** Calls `listener` once when the response is closed, finished or not. */
  once(event: "close", listener: () => void): unknown;
}

/** The methods of Node's `ServerResponse` that end it, for {@link NodeExchange.followResponse}. */
export interface NodeEndable {
  /** `true` once `end()` has been called. */
  readonly writableEnded: boolean;
  /** Calls `listener` once on `unpipe` (a piped stream stopped) or `close`. */
  once(event: "unpipe" | "close", listener: () => void): unknown;
  /** Ends the response. */
  // deno-lint-ignore no-explicit-any
  end: (...args: any[]) => any;
  /** Destroys the response. */
  // deno-lint-ignore no-explicit-any
  destroy: (...args: any[]) => any;
}

/** The part of Node's socket the disconnect guard reads. */
export interface NodeSocketLike {
  /** `true` once the connection is closed. */
  readonly destroyed?: boolean;
}

/**
 * The disconnect guard every Node adapter runs before deciding: the client left while earlier
 * middleware ran and took its address with it. No one will read the answer, and counting it
 * under the key every address-less request shares would spend their quota: nothing is charged
 * and the handler does not run.
 */
export function leftBeforeDecision(peerIp: string | undefined, socket: NodeSocketLike | undefined): boolean {
  return (peerIp === undefined || peerIp === "") && socket?.destroyed === true;
}

/** Sets every `[name, value, ...]` pair with `set`: the one header loop of every adapter. */
export function setHeaders(pairs: readonly string[], set: (name: string, value: string) => unknown): void {
  for (let i = 0; i < pairs.length; i += 2) set(pairs[i]!, pairs[i + 1]!);
}

/**
 * Sets every `[name, value, ...]` pair with `set` (a Node response's `setHeader`), each of
 * Floodgate's own names in lower case (`NODE_HEADER_NAMES`: the form Node stores and writes
 * with the least work); any other name as it is.
 */
export function setNodeHeaders(pairs: readonly string[], set: (name: string, value: string) => unknown): void {
  for (let i = 0; i < pairs.length; i += 2) {
    const name = pairs[i]!;
    // A rule writes the same names in the same order on every request: the last name seen at
    // this place, compared by identity, spares the look-up.
    if (names[i] !== name) lowerNames[i] = NODE_HEADER_NAMES.get(names[i] = name) ?? name;
    set(lowerNames[i]!, pairs[i + 1]!);
  }
}

/**
 * {@link setNodeHeaders} straight onto a Node response (`res.setHeader` for each pair), without a
 * function made per request to set them.
 */
export function setNodeResponseHeaders(res: { setHeader(name: string, value: string): unknown }, pairs: readonly string[]): void {
  for (let i = 0; i < pairs.length; i += 2) {
    const name = pairs[i]!;
    if (names[i] !== name) lowerNames[i] = NODE_HEADER_NAMES.get(names[i] = name) ?? name;
    res.setHeader(lowerNames[i]!, pairs[i + 1]!);
  }
}

/** By place in the pairs, the last name {@link setNodeHeaders} set, and the form it set it in. */
const names: string[] = [];
const lowerNames: string[] = [];

/**
 * One request on Node, from before its decision to its end. Made before the decision, so a client
 * that disconnects while the store decides is seen: by the response's `destroyed` when it has one
 * (Node's does), else by a `close` listener registered at once. The listener, which costs a few
 * thousand instructions per request, is registered only for a request with something to settle
 * (see {@link start}). Then:
 * - {@link start} hands it the decision; `false` means the client is gone already: what the
 *   request holds is given back at once (status 0, nothing used) and the handler must not run;
 * - {@link handlerEnded} marks the handler's end (`threw`: it threw, or its error went to the
 *   framework's error handling);
 * - the request is settled at the later of the handler's end and the response's close: a
 *   concurrency unit is held while the handler still runs after its client has gone. A request
 *   that settles nothing (no reservation) is settled at the close, as before.
 */
export class NodeExchangeBase {
  #closed = false;
  /** The status the close reported: the response's, or 0 when it was not completely sent. */
  #status = 0;
  #handlerDone = false;
  #threw = false;
  #bodyFailed = false;
  #result: RateLimitResult | undefined;
  /** Whether the close listener is registered. */
  #watching = false;

  /** The response whose close is watched. */
  readonly res: NodeResponseLike;

  /** Make it before the decision: a response without `destroyed` has its close listener registered at once. */
  constructor(res: NodeResponseLike) {
    this.res = res;
    if (typeof res.destroyed !== "boolean") this.#watch();
  }

  #watch(): void {
    this.#watching = true;
    const res = this.res;
    res.once("close", () => this.#close());
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const res = this.res;
    this.#status = res.writableFinished === false ? 0 : res.statusCode;
    // The last report before the response ended is what counts, even while the handler still runs.
    this.#result?.endReports();
    this.#settle();
  }

  /** Whether the response closed before it was completely sent (the client is gone). */
  get gone(): boolean {
    if (!this.#watching && !this.#closed && this.res.destroyed === true) this.#close();
    return this.#closed && this.#status === 0;
  }

  /**
   * Hands over the decision. Returns `false` when the client left while it was being made: the
   * request is settled at once as not run (see `RateLimitResult.abandon`), and the adapter must
   * neither run the handler nor answer.
   */
  start(result: RateLimitResult): boolean {
    if (this.gone) {
      result.abandon();
      return false;
    }
    this.#result = result;
    // Only a reservation waits for the handler: a refund by status is known at the close.
    if (!result.holds) this.#handlerDone = true;
    // A request with nothing to settle needs no listener: nothing is done at its close.
    if (!this.#watching && !this.#closed && result.settles) this.#watch();
    this.#settle();
    return true;
  }

  /** The handler has ended; `threw`: by an error (the last report, else the estimate, is settled). */
  handlerEnded(threw = false): void {
    if (threw) this.#threw = true;
    this.#handlerDone = true;
    this.#settle();
  }

  /** The response's body failed on the way: settled as a response not completely sent. */
  bodyFailed(): void {
    this.#bodyFailed = true;
  }

  /**
   * Runs `downstream` (the rest of the middleware chain: the handler) and marks its end: `threw`
   * when it rejects (rethrown), else as `outcome` says (an error the framework caught and
   * answered; a Node stream body, whose failure on the way is watched).
   */
  async around(downstream: () => Promise<unknown>, outcome?: () => { threw?: boolean; body?: unknown }): Promise<void> {
    try {
      await downstream();
    } catch (error) {
      this.handlerEnded(true);
      throw error;
    }
    const after = outcome?.();
    const body = after?.body as { once?: (event: "error", listener: () => void) => unknown; pipe?: unknown } | null | undefined;
    if (this.#result?.holds && typeof body?.pipe === "function" && typeof body.once === "function") {
      body.once("error", () => this.bodyFailed());
    }
    this.handlerEnded(after?.threw === true);
  }

  /** Whether the request holds a reservation until it is settled (a concurrency unit, or a cost's estimate), not settled yet. */
  get holds(): boolean {
    return this.#result?.holds === true;
  }

  #settle(): void {
    const result = this.#result;
    if (result === undefined || !this.#closed || !this.#handlerDone) return;
    this.#result = undefined;
    if (this.#threw) result.settle(this.#status === 0 ? 0 : HANDLER_THREW);
    else if (this.#bodyFailed) result.settle(0);
    else result.settle(this.#status, this.#status === 0 ? undefined : this.res);
  }
}

/**
 * Hands a decision to the exchange that follows its request, `exchange` when one was made before
 * the decision (see {@link NodeExchangeBase}), else made now: for a decision made without a
 * promise, in the turn the middleware started, when no close could have come meanwhile. Returns
 * `false` when the client has gone (what the request holds is given back; the adapter must
 * neither run the handler nor answer); `undefined` when it goes on with nothing to settle at its
 * end, which no exchange then follows (none is made for it); else the exchange, whose
 * {@link NodeExchangeBase.around} runs the handler.
 */
export function followDecision(
  res: NodeResponseLike,
  result: RateLimitResult,
  exchange?: NodeExchangeBase,
): NodeExchangeBase | false | undefined {
  if (exchange === undefined && !result.settles) {
    if (res.destroyed !== true) return undefined;
    result.abandon();
    return false;
  }
  const followed = exchange ?? new NodeExchangeBase(res);
  if (!followed.start(result)) return false;
  return result.settles ? followed : undefined;
}

/**
 * {@link NodeExchangeBase} with {@link followResponse}, for a framework that runs no code of the
 * middleware after the handler (Express). An adapter that does (Hono, Koa) needs only the base,
 * and a bundle of it leaves this out.
 */
export class NodeExchange extends NodeExchangeBase {
  /**
   * For a framework that runs no code of the middleware after the handler (Express): the
   * handler's end is when it ends the response (`res.end()`, and so `send`, `json`, an error
   * handler's answer), destroys it (`stream.pipeline` does when the client has gone), or a stream
   * piped into it stops. A handler that notices its client has gone and returns without any of
   * these holds its unit until the policy's `timeout`. `threw` tells whether its error went to the
   * framework's error handling.
   */
  followResponse(res: NodeEndable, threw: () => boolean): void {
    if (!this.holds) return;
    if (res.writableEnded) return this.handlerEnded(threw());
    const { end, destroy } = res;
    let done = false;
    const ended = (): void => {
      if (done) return;
      done = true;
      res.end = end;
      res.destroy = destroy;
      this.handlerEnded(threw());
    };
    // `source.pipe(res)` stops when the client has gone, ending nothing: its work is over then.
    res.once("unpipe", ended);
    // An error passed on after the headers were sent: the framework destroys the socket, not the response.
    res.once("close", () => threw() && ended());
    res.end = function (this: unknown, ...args: unknown[]) {
      ended();
      return end.apply(this, args);
    };
    res.destroy = function (this: unknown, ...args: unknown[]) {
      ended();
      return destroy.apply(this, args);
    };
  }
}

/** The status a request whose handler threw is settled with (what a runtime answers), without a response for `actual`. */
export const HANDLER_THREW = 500;

/**
 * Reports a Node response's outcome to `result.settle` when it closes: its status when it was
 * sent completely, 0 when the client disconnected first. Kept for adapters written against it;
 * {@link NodeExchange} also sees a close during the decision and waits for the handler's end.
 */
export function settleOnClose(
  result: { readonly settles: boolean; settle(status: number, response?: unknown): void },
  res: NodeResponseLike,
): void {
  if (!result.settles) return;
  res.once("close", () => result.settle(res.writableFinished === false ? 0 : res.statusCode, res));
}
