import { packageProject } from "../../vitest.shared.ts";

// One Ceph RGW gateway serves every suite of a run; the global setup starts and stops it. The
// suites that publish through the workflows, the CLI or the upload server against it live in
// packages/e2e.
export default packageProject("storage-s3", {
  globalSetup: ["test/global-setup.ts"],
  testTimeout: 60_000,
  hookTimeout: 60_000,
  // The SDK's notice that its releases after January 2027 need Node 22 would fill the output.
  env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
});
