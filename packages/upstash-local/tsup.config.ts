import { packageBuild } from "../../tsup.base.ts";

// A Node tool (node:http, node:net). The bin, dist/cli.js, is a second entry; only the library
// entry gets type declarations.
export default packageBuild("node", { index: "src/index.ts", cli: "src/cli.ts" }, { dts: { entry: { index: "src/index.ts" } } });
