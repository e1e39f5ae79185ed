/** The `pending` of what has nothing left to do: resolved, and one object, so that it can be recognised. */
export const RESOLVED: Promise<void> = /* @__PURE__ */ Promise.resolve();
