import { packageBuild } from "../../tsup.base.ts";

// Runs unchanged on Node, Deno, Bun, workerd and in browsers. Two entries: `@floodgate/core` for
// applications, `@floodgate/core/http` for adapter authors.
export default packageBuild("neutral", { index: "src/index.ts", http: "src/http/index.ts" });
