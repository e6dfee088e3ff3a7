export { runSteps, type Steps } from "@distributor/storage";

/** Records handled between two pauses of the state package's steps (see `Steps`). */
export const STEP_RECORDS = 1000;
