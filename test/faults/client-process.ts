/**
 * Closed-loop HTTP clients in a process of their own (`node --import tsx test/faults/client-process.ts`,
 * forked with IPC), so that their work shares no event loop with the apps or the test. Messages:
 * `load` starts the clients on the given targets, `stop` stops them and answers every request's
 * sample as flat `[app, startMs, ms, status]` quadruples, `exit` ends the process.
 */
import { runClients, type Sample, type Target } from "./support.ts";

type Message = { type: "load"; targets: Target[]; thinkMs: number; jitter: boolean } | { type: "stop" } | { type: "exit" };

const samples: Sample[] = [];
let load: { stop(): Promise<void> } | undefined;

process.on("message", async (message: Message) => {
  if (message.type === "load") {
    samples.length = 0;
    load = runClients(message.targets, message.thinkMs, samples, message.jitter);
  } else if (message.type === "stop") {
    await load?.stop();
    load = undefined;
    process.send!({ type: "samples", samples: samples.flatMap((s) => [s.app, s.startMs, s.ms, s.status]) });
  } else {
    // Idle keep-alive sockets would hold the process open.
    process.exit(0);
  }
});
process.send!({ type: "ready" });
