import { packageProject } from "../../vitest.shared.ts";

// Scenarios across packages against real servers: the CLI, the workflows and the upload server
// publishing to a Ceph RGW gateway and to an OpenSSH sshd, both started once per run by the global
// setups after the packages the suites run are built. Under CI a server that cannot start fails the
// run; elsewhere its suites skip and say why.
export default packageProject("e2e", {
  globalSetup: ["test/setup/build.ts", "test/setup/s3.ts", "test/setup/sshd.ts"],
  testTimeout: 60_000,
  hookTimeout: 60_000,
  // The SDK's notice that releases after January 2027 need Node 22 would fill every CLI stderr.
  env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
});
