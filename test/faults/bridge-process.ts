/**
 * The Upstash side of the store-fault suite, in its own process as a remote service would be
 * (`node --import tsx test/faults/bridge-process.ts`, forked with IPC): the local Upstash bridge
 * over the suite's redis-server (FG_REDIS_PORT), behind the fault proxy. Messages: `fault` sets
 * the proxy's fault, `counts` answers the proxy's counts, `exit` stops both.
 */
import { startUpstashBridge } from "@floodgate/upstash-local";
import { type Fault, startFaultProxy } from "../support/fault-proxy.ts";

const bridge = await startUpstashBridge({ redis: { host: "127.0.0.1", port: Number(process.env["FG_REDIS_PORT"]) } });
const proxy = await startFaultProxy(bridge.url);

process.on("message", async (message: { type: "fault"; fault: Fault } | { type: "counts" } | { type: "exit" }) => {
  if (message.type === "fault") {
    proxy.set(message.fault);
    process.send!({ type: "set" });
  } else if (message.type === "counts") {
    process.send!({ type: "counts", counts: { ...proxy.counts } });
  } else {
    await proxy.close();
    await bridge.stop();
    process.disconnect();
  }
});
process.send!({ type: "ready", url: proxy.url, token: bridge.token });
