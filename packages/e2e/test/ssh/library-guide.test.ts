import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPublish, guideProject, runScript, writeBundle } from "../support/library-guide.js";
import { freshRoot, server, sshd } from "./shared.js";

// The guide's publishing program, copied verbatim, against the shared OpenSSH server, with only
// @distributor/publish and @distributor/storage-ssh installed.
describe.skipIf(sshd === null)("the library guide's program with SSH", () => {
  let dir = "";
  let root = "";

  beforeAll(async () => {
    await buildPublish();
    const shared = server();
    root = await freshRoot();
    dir = await mkdtemp(join(tmpdir(), "distributor-guide-ssh-"));
    await guideProject(dir, ["publish", "storage-ssh"], ["publish.mjs"]);
    await writeBundle(join(dir, "outgoing", "daily"), "reports.daily", "2026-06-04T11:55:00Z", {
      "report.md": "# Report\nSunny.\n",
    });
    await writeFile(
      join(dir, "distributor.yml"),
      `pipelines:
  - id: reports
    source: {backend: local, path: ./outgoing}
    destinations:
      - id: mirror
        backend: ssh
        host: ${shared.host}
        port: ${shared.port}
        user: ${shared.user}
        path: ${root}
        private_key_file: ${shared.clientKeyFile}
        known_hosts_file: ${shared.knownHostsFile}
`,
    );
  }, 180_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("publishes over SFTP with remoteBackends()", async () => {
    const first = await runScript(dir, ["publish.mjs", "distributor.yml"]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toBe("reports mirror publish_new published\n");
    // The server runs on this machine: its files are the destination's bytes.
    expect(await readFile(join(root, "daily", "report.md"), "utf8")).toBe("# Report\nSunny.\n");
    const state = JSON.parse(await readFile(join(root, "daily", ".distributor.json"), "utf8"));
    expect(state.source.manifest.id).toBe("reports.daily");

    const again = await runScript(dir, ["publish.mjs", "distributor.yml"]);
    expect(again.stdout).toBe("reports mirror skip_same skipped\n");
  });
});
