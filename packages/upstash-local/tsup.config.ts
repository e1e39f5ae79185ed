import { packageBuild } from "../../tsup.base.ts";

// A Node tool (node:http, node:net). The bin, dist/cli.js, is a second entry; only the library
// entry gets type declarations.
export default packageBuild("node", { entry: ["src/index.ts", "src/cli.ts"], dts: { entry: "src/index.ts" } });
