/**
 * Starts a real DynamoDB-compatible server for a test: dynalite (npm) in a child process on a
 * free loopback port (fixtures/dynalite-server.cjs says what it lacks and how `aws` adds it).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";

// This machine runs Node 20: the SDK's notice that later versions will need 22 is not the tests' business.
process.env["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] = "true";

const SERVER = fileURLToPath(new URL("./fixtures/dynalite-server.cjs", import.meta.url));

export interface Dynalite {
  readonly endpoint: string;
  /** A client of this server (credentials are checked for presence only; access key "no-permission" is refused everything). */
  client(options?: { maxAttempts?: number; accessKeyId?: string }): DynamoDBClient;
  stop(): Promise<void>;
}

/**
 * `aws` (default true): with the parts dynalite lacks added as DynamoDB documents them
 * (ALL_OLD on a failed condition, TTL settings); false: dynalite as published.
 */
export async function startDynalite(options: { aws?: boolean } = {}): Promise<Dynalite> {
  const child: ChildProcess = spawn(process.execPath, [SERVER], {
    env: { ...process.env, FG_DYNALITE_AWS: options.aws === false ? "0" : "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`dynalite exited (${code}) before listening`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const clients: DynamoDBClient[] = [];
  return {
    endpoint,
    client(o = {}) {
      const client = dynamoClient(endpoint, o.maxAttempts, o.accessKeyId);
      clients.push(client);
      return client;
    },
    async stop() {
      for (const c of clients.splice(0)) c.destroy();
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** A DynamoDB client of a local endpoint, with placeholder credentials. */
export function dynamoClient(endpoint: string, maxAttempts?: number, accessKeyId = "local"): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId, secretAccessKey: "local" },
    // Hundreds of concurrent calls per process: more sockets than the default 50, and no queue warnings.
    requestHandler: { httpAgent: { keepAlive: true, maxSockets: 256 } },
    ...(maxAttempts === undefined ? {} : { maxAttempts }),
  });
}
