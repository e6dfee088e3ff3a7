// Entry of `@distributor/server/testing`: an upload server started on 127.0.0.1:0, bundles packed
// as a producer sends them, and the producer's requests with every answer checked against its wire
// record. For the server's suites and the end-to-end suites that stage uploads on a real backend.
export { bundleArchive, packDirectory, writeBundle } from "./bundles.js";
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
