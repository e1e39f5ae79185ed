import { packageBuild } from "../../tsup.base.ts";

// Runs in workerd only: `cloudflare:workers` is the runtime's own module, left to it.
export default packageBuild("neutral", { index: "src/index.ts" }, {
  external: ["cloudflare:workers"],
});
