import { packageBuild } from "../../tsup.base.ts";

// Runs on Deno (Deno.openKv()) and on Node with @deno/kv: it only calls the Kv it is given.
export default packageBuild("neutral");
