// Entry of `@distributor/storage-s3/testing`: a throwaway single-node Ceph RGW gateway (started once
// per run by a vitest global setup, shared through `inject`) and the helpers suites use on it —
// buckets of their own, a raw client to look at what is really stored, backends opened on it.
// For this package's tests and for the end-to-end suites that publish to S3.
export {
  CEPH_BINARIES,
  type CephCluster,
  cephInstalled,
  type S3Server,
  startCeph,
} from "./ceph.js";
export {
  backendOn,
  createBucket,
  emptyBucket,
  listKeys,
  rawClient,
  s3Server,
  uniqueName,
  useBucket,
} from "./gateway.js";
export { startSharedGateway } from "./shared-gateway.js";
