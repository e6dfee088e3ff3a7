import { packageProject } from "../../vitest.shared.ts";

// The SFTP suites run against a real OpenSSH sshd that the global setup starts on loopback. The
// suites that publish over SFTP through the workflows or the CLI live in packages/e2e.
export default packageProject("storage-ssh", { globalSetup: ["test/global-setup.ts"] });
