// Entry of `@distributor/cli/testing`: the built `distributor` run as a separate process and what
// tests read back (envelopes, digests of what a destination holds), the completeness scenarios
// every backend's suite runs through the CLI, and the release-layout helpers (sites, a reader of
// `current` in its own process). For the CLI's suites and the end-to-end suites on real servers.
export {
  actionOf,
  type CompletenessHarness,
  type DestinationKeys,
  expectExactly,
  htmlTurnedOnAndOff,
  type RollbackBundles,
  rollbackAfterInterruptedReplacement,
  rollbackBundles,
  type StoredState,
} from "./completeness.js";
export {
  BIN,
  type CliResult,
  digestsBelow,
  digestsOf,
  envelopeOf,
  resultOf,
  runCli,
  sha256Of,
  spawnCli,
  spawnUpload,
  useTempDir,
  writeBundle,
  writeFiles,
} from "./process.js";
export {
  filesBelow,
  ownerFlags,
  type ReaderReport,
  releaseIds,
  same,
  site,
  startReader,
  TRUST_FILES_A,
  TRUST_FILES_B,
} from "./releases.js";
export { type Serving, startServe } from "./serve.js";
export { PREVIEW, stagingScenario } from "./staging.js";
