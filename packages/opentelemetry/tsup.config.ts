import { packageBuild } from "../../tsup.base.ts";

// Only @opentelemetry/api and @floodgate/core: runs wherever the HTTP layer runs.
export default packageBuild("neutral");
