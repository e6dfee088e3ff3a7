export { startPostgres, type TestPostgres } from "./postgres.js";
