import { packageProject } from "../../vitest.shared.ts";

// The SFTP suites run against a real OpenSSH sshd that the global setup starts on loopback. The
// fault suite publishes through the workflows with the engine's fault model: packages that depend
// on this one, so they cannot be declared here.
export default packageProject(
  "storage-ssh",
  { globalSetup: ["test/global-setup.ts"] },
  { integration: ["engine", "publish"] },
);
