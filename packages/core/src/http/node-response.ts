/** The part of Node's `ServerResponse` that refunds need; duck-typed so core imports no `node:*`. */
export interface NodeResponseLike {
  /** The status sent (or about to be). */
  readonly statusCode: number;
  /** `false` when the connection closed before the response was completely sent. */
  readonly writableFinished?: boolean;
  /** Calls `listener` once when the response is closed, finished or not. */
  once(event: "close", listener: () => void): unknown;
}

/**
 * Reports a Node response's outcome to `result.settle` when it closes (after the last byte of a
 * streamed body too): its status when it was sent completely, 0 when the client disconnected
 * first (a failed request), with the response itself for a cost's `actual` to read.
 */
export function settleOnClose(
  result: { readonly settles: boolean; settle(status: number, response?: unknown): void },
  res: NodeResponseLike,
): void {
  if (!result.settles) return;
  res.once("close", () => result.settle(res.writableFinished === false ? 0 : res.statusCode, res));
}
