import { packageBuild } from "../../tsup.base.ts";

// Runs wherever the test runner does: Node (vitest), Deno and Bun.
export default packageBuild("neutral", { index: "src/index.ts" }, { external: ["vitest", "@floodgate/core", "@floodgate/core/store"] });
