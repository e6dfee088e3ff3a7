import { packageProject } from "../../vitest.shared.ts";

// The SFTP suites run against a real OpenSSH sshd that the global setup starts on loopback.
export default packageProject("storage-ssh", { globalSetup: ["test/global-setup.ts"] });
