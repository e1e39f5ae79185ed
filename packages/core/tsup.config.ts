import { packageBuild } from "../../tsup.base.ts";

// Runs unchanged on Node, Deno, Bun, workerd and in browsers. Three entries: `@floodgate/core` for
// applications, `@floodgate/core/http` for adapter authors, `@floodgate/core/store` for store authors.
export default packageBuild("neutral", { index: "src/index.ts", http: "src/http/index.ts", store: "src/stores/index.ts" });
