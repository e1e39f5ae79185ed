import { packageBuild } from "../../tsup.base.ts";

// Node: Lambda's runtime.
export default packageBuild("node");
