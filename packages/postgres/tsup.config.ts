import { packageBuild } from "../../tsup.base.ts";

// Runs unchanged on Node, Deno, Bun, workerd and in browsers.
export default packageBuild("neutral");
