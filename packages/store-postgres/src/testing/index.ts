export { liveClaims, startPostgres, type TestPostgres } from "./postgres.js";
export { type StalledTake, stallWhileTaking } from "./stall.js";
