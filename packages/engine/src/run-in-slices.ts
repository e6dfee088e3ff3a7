// Long synchronous work (a big state parsed, encoded or compared) runs in slices, the event loop
// turning between them: the runner is storage's, shared with the bundle package's manifests.
export { runInSlices } from "@distributor/storage";
