import { packageBuild } from "../../tsup.base.ts";

// Plain TypeScript over any mysql2-shaped client: no node:* import of its own.
export default packageBuild("neutral");
