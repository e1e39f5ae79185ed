import { FloodgateError } from "../../errors.ts";
import type { ScriptTransport } from "./script-store.ts";

/*
 * The Redis client's connection, as the store sees it. Both ioredis and node-redis queue commands
 * while they are not connected, so a server that is down, or a mistyped host, would make every
 * call wait for its deadline: once the client has reported a connection error and is not
 * connected, a call fails at once instead (a STORE_ERROR, which counts and is logged at once).
 * And when a connection goes half-open (a hop stops forwarding while new connections work), only
 * a new connection helps: `reconnect()` moves the store to a fresh client.
 *
 * The connection it leaves is never closed under its commands: a command sent on it may still
 * run, and its late answer is what gives its charge back (see resilient-store.ts). Re-sending it
 * on the new connection could charge twice; so the caller's client is left as it is, and a
 * client the store made is closed with QUIT, after what it has in flight.
 */

/** ioredis and node-redis clients are event emitters: "error" on a connection failure, "ready" once connected. */
interface Emitter {
  on(event: string, listener: (arg: unknown) => void): unknown;
  off?(event: string, listener: (arg: unknown) => void): unknown;
  removeListener?(event: string, listener: (arg: unknown) => void): unknown;
}

/** What the store reads of a client: ioredis' `status`, node-redis' `isReady`, and how to copy or close it. */
interface ClientState {
  readonly status?: unknown;
  readonly isReady?: unknown;
  duplicate?(): unknown;
  connect?(): unknown;
  quit?(): unknown;
  close?(): unknown;
}

/**
 * How the store gets a fresh connection: `true` (default) a copy of the client (`duplicate()`,
 * connected), `false` for none, or a function returning a new connected client (the store then
 * owns it, and closes it when it moves on or is disposed).
 */
export type ReconnectOption = boolean | (() => unknown);

/** What a client's events said, shared by every store on that client (one set of listeners each). */
interface Health {
  error: unknown;
  readyByEvent: boolean;
  users: number;
  stop(): void;
}

const HEALTH = new WeakMap<object, Health>();

/** One client as one store uses it: its transport, and whether the store made it (and must close it). */
interface Watched {
  readonly client: ClientState;
  readonly transport: ScriptTransport;
  readonly owned: boolean;
  readonly health: Health;
  /** Whether a call on it has succeeded: only a connection that worked is replaced (not a new one that never answered). */
  answered: boolean;
  readonly stop: () => void;
}

/**
 * A transport over `client` (as `transportOf` builds it) that fails calls at once while the
 * client reports it cannot connect, and whose `reconnect` moves to a fresh client.
 */
export function watchConnection(
  client: object,
  nodeRedis: boolean,
  transportOf: (client: object) => ScriptTransport,
  reconnect: ReconnectOption | undefined,
): ScriptTransport {
  const fresh = reconnect === false
    ? undefined
    : typeof reconnect === "function"
    ? reconnect
    : typeof (client as ClientState).duplicate === "function"
    ? () => {
      const copy = (client as ClientState).duplicate!() as ClientState;
      // node-redis makes it unconnected; ioredis connects on its own.
      return nodeRedis && typeof copy.connect === "function" ? Promise.resolve(copy.connect()).then(() => copy) : copy;
    }
    : undefined;
  let current = watch(client as ClientState, transportOf(client), false);
  let replacing = false;
  let disposed = false;

  // Spelled out per operation, no closure per call: this is every decision.
  return {
    evalsha(sha, keys, args) {
      const w = current;
      if (w.health.error !== undefined && !isReady(w)) return Promise.reject(unreachable(w.health.error));
      const answer = w.transport.evalsha(sha, keys, args);
      if (!w.answered) noteAnswer(w, answer);
      return answer;
    },
    eval(source, keys, args) {
      const w = current;
      if (w.health.error !== undefined && !isReady(w)) return Promise.reject(unreachable(w.health.error));
      const answer = w.transport.eval(source, keys, args);
      if (!w.answered) noteAnswer(w, answer);
      return answer;
    },
    del(keys) {
      const w = current;
      if (w.health.error !== undefined && !isReady(w)) return Promise.reject(unreachable(w.health.error));
      const answer = w.transport.del(keys);
      if (!w.answered) noteAnswer(w, answer);
      return answer;
    },
    reconnect() {
      if (fresh === undefined || replacing || disposed || !current.answered) return;
      replacing = true;
      new Promise((resolve) => resolve(fresh())).then(
        (next) => {
          replacing = false;
          if (disposed || typeof next !== "object" || next === null) return close(next as ClientState);
          const left = current;
          current = watch(next as ClientState, transportOf(next), true);
          if (left.owned) close(left.client);
          left.stop();
        },
        () => {
          replacing = false;
        },
      );
    },
    dispose() {
      disposed = true;
      current.stop();
      if (current.owned) close(current.client);
    },
  };
}

/** Notes the connection's first answer (only a connection that has answered is replaced). */
function noteAnswer(w: Watched, answer: Promise<unknown>): void {
  answer.then(() => {
    w.answered = true;
  }, () => undefined);
}

function watch(client: ClientState, transport: ScriptTransport, owned: boolean): Watched {
  const health = healthOf(client);
  health.users++;
  let stopped = false;
  return {
    client,
    transport,
    owned,
    health,
    answered: false,
    stop: () => {
      if (stopped) return;
      stopped = true;
      if (--health.users === 0) health.stop();
    },
  };
}

function healthOf(client: ClientState): Health {
  const known = HEALTH.get(client);
  if (known !== undefined) return known;
  const health: Health = { error: undefined, readyByEvent: false, users: 0, stop: () => HEALTH.delete(client) };
  HEALTH.set(client, health);
  const emitter = client as Partial<Emitter>;
  if (typeof emitter.on !== "function") return health;
  const listeners: [string, (arg: unknown) => void][] = [
    ["error", (e) => {
      health.error = e;
    }],
    ["ready", () => {
      health.error = undefined;
      health.readyByEvent = true;
    }],
    ["end", () => {
      health.readyByEvent = false;
    }],
  ];
  for (const [event, listener] of listeners) emitter.on(event, listener);
  health.stop = () => {
    HEALTH.delete(client);
    for (const [event, listener] of listeners) {
      if (typeof emitter.off === "function") emitter.off(event, listener);
      else emitter.removeListener?.(event, listener);
    }
  };
  return health;
}

const isReady = (w: Watched): boolean =>
  typeof w.client.status === "string"
    ? w.client.status === "ready"
    : typeof w.client.isReady === "boolean"
    ? w.client.isReady
    : w.health.readyByEvent;

function unreachable(error: unknown): FloodgateError {
  return new FloodgateError(
    "STORE_ERROR",
    `The Redis client cannot reach the server (${
      error instanceof Error ? error.message : String(error)
    }); the call was not sent. The client reconnects on its own, and calls go through once it is connected.`,
    { cause: error },
  );
}

/** Closes a client the store made, after the commands it has in flight (QUIT; node-redis: close()). */
function close(client: ClientState | undefined): void {
  if (client === undefined || client === null) return;
  try {
    const done = typeof client.close === "function" ? client.close() : client.quit?.();
    Promise.resolve(done).then(undefined, () => undefined);
  } catch {
    // Closed already.
  }
}
