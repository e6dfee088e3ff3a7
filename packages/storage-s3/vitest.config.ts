import { packageProject } from "../../vitest.shared.ts";

// One Ceph RGW gateway serves every suite of a run; the global setup starts and stops it. Its
// integration suites run the workflows, the engine's fault model and the upload server against
// that gateway (and, for several instances, PostgreSQL): packages that depend on this one, so
// they cannot be declared here.
export default packageProject(
  "storage-s3",
  {
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The SDK's notice that releases after January 2027 need Node 22 would fill every CLI stderr.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
  { integration: ["engine", "publish", "server", "store-postgres"] },
);
