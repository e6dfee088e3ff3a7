export { liveClaims, startPostgres, type TestPostgres } from "./postgres.js";
