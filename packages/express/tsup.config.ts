import { packageBuild } from "../../tsup.base.ts";

// Two entries: the middleware, and `@floodgate/express/augment`, the opt-in typing of `req.rateLimit`.
export default packageBuild("node", { index: "src/index.ts", augment: "src/augment.ts" });
