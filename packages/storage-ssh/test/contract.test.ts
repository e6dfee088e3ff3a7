import { rm } from "node:fs/promises";
import { describeBackendContract } from "@distributor/storage/testing";
import { describe } from "vitest";
import { freshBackend, sshd } from "./fixture.js";

describe.skipIf(sshd === null)("over SFTP", () => {
  describeBackendContract(
    "ssh",
    async () => {
      const { backend, root } = await freshBackend();
      return { backend, cleanup: () => rm(root, { recursive: true, force: true }) };
    },
    { links: "full" },
  );
});
