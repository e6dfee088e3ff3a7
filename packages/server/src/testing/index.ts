// Entry of `@distributor/server/testing`: an upload server started on 127.0.0.1:0, bundles packed
// as a producer sends them, the producer's requests with every answer checked against its wire
// record, tus requests, and the partial-store contract with what a test needs to read a partial
// around its store (the S3 store, chunk names and their coverage). For the server's suites and the
// end-to-end suites that stage uploads on a real backend.
export { CHUNK_BYTES, type Chunk, coverage, parseChunk } from "../resumable/chunks.js";
export { s3PartialStore } from "../resumable/s3-store.js";
export { bundleArchive, packDirectory, writeBundle } from "./bundles.js";
export {
  declaration,
  type PartialStoreFixture,
  partialStoreContract,
} from "./partial-store-contract.js";
export {
  createTus,
  deleteTus,
  errorCode,
  headTus,
  metricsText,
  patchTus,
  sha256Hex,
} from "./tus-requests.js";
export {
  checkWire,
  getJson,
  OTHER_TOKEN,
  type Running,
  startServer,
  TOKEN,
  TOKEN_ENV,
  tree,
  type UploadOptions,
  upload,
  waitForRun,
  wireSchemaOf,
  workspace,
} from "./upload-api.js";
