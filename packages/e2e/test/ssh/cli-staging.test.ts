import { mkdtemp, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PREVIEW, stagingScenario, useTempDir } from "@distributor/cli/testing";
import { startSshd, type TestSshd } from "@distributor/storage-ssh/testing";
import { afterAll, describe, it } from "vitest";

// Staged releases through the real CLI on an SFTP destination (a real OpenSSH server on
// loopback, whose files this test reads directly); see `stagingScenario` of @distributor/cli/testing.

const ci = process.env.CI;
const required = ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
let sshd: TestSshd | undefined;
try {
  sshd = await startSshd();
} catch (error) {
  if (required) throw error;
  console.warn(`CLI SSH staging tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await sshd?.stop();
});

const tmp = useTempDir();

describe.skipIf(sshd === undefined)("staged releases on an SSH destination", () => {
  it("stages B while A stays live, promotes it, rolls back, and refuses what changed", async () => {
    const s = sshd as TestSshd;
    const source = join(tmp(), "src");
    const root = await mkdtemp(join(s.sftpRoot, "staging-"));
    const knownHosts = join(tmp(), "known_hosts");
    await writeFile(knownHosts, s.knownHostsLine);
    const config = join(tmp(), "distributor.yml");
    await writeFile(
      config,
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: ssh\n        host: ${s.host}\n        port: ${s.port}\n        user: ${s.user}\n        path: ${root}\n        private_key_file: ${s.clientKeyFile}\n        known_hosts_file: ${knownHosts}\n        host_key_policy: strict\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: 2, preview_url: "${PREVIEW}"}\n`,
    );
    await stagingScenario({ source, root, config, tmp: tmp(), pages: 120 });
  }, 240_000);
});
