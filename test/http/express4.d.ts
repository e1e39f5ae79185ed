// Express 4, installed under the alias "express4" beside Express 5, so the one scenario table runs
// on both majors. Its API surface used here is the same as Express 5's types describe.
declare module "express4" {
  import express from "express";
  export default express;
}
