// Entry of `@distributor/upload-client/testing`: a server that speaks the upload API's wire
// protocol and records what it received, with faults to inject, for tests of producers (this
// package's client, the `distributor upload` command) without a real `distributor serve`.
export {
  type Fault,
  type ReceivedEntry,
  type ReceivedRequest,
  type ReceivedUpload,
  WireServer,
  type WireServerOptions,
} from "./wire-server.js";
