import { execFile, spawnSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { resultOf, runCli, sha256Of, useTempDir, writeBundle } from "@distributor/cli/testing";
import { startSshd, type TestSshd } from "@distributor/storage-ssh/testing";
import { afterAll, describe, expect, it } from "vitest";

// Destination repair over SFTP through the real CLI process and a real OpenSSH server: audit,
// run --repair, adoption after `rsync -a` over ssh, rebuilding a corrupted state, and pruning an
// archive of bundle paths. Under CI a missing sshd fails the suite; elsewhere it is skipped.
const ci = process.env.CI;
const required = ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
let sshd: TestSshd | undefined;
try {
  sshd = await startSshd();
} catch (error) {
  if (required) throw error;
  console.warn(`CLI SSH repair tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await sshd?.stop();
});

const tmp = useTempDir();
const execTool = promisify(execFile);

/**
 * `rsync`, as an operator has it. Under CI a missing one fails the test (.ci/run installs it);
 * elsewhere the test is skipped.
 */
const rsyncSkipped =
  spawnSync("rsync", ["--version"]).error !== undefined &&
  ["", "0", "false", undefined].includes(process.env.CI);

function server(): TestSshd {
  if (sshd === undefined) throw new Error("sshd is not running");
  return sshd;
}

const FILES = {
  "report.md": "# Report\nSunny.\n",
  "data/summary.txt": "Summary of the day\n",
  "data/table.csv": "a,b\n1,2\n",
};

/** A config publishing `source` to a fresh directory on the server; returns both. */
async function sshSetup(source: string, extra = "") {
  const root = await mkdtemp(join(server().sftpRoot, "repair-"));
  const knownHosts = join(tmp(), "known_hosts");
  await writeFile(knownHosts, server().knownHostsLine);
  const s = server();
  const config = join(tmp(), "distributor.yml");
  await writeFile(
    config,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: remote\n        backend: ssh\n        host: ${s.host}\n        port: ${s.port}\n        user: ${s.user}\n        path: ${root}\n        private_key_file: ${s.clientKeyFile}\n        known_hosts_file: ${knownHosts}\n${extra}`,
  );
  const selector = ["--config", config, "--pipeline", "reports", "--destination", "remote"];
  return { root, config, knownHosts, selector };
}

/** Inode, modification time and bytes of every file below `root` but the state. */
async function fileIdentities(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || entry.name === ".distributor.json") continue;
    const path = join(entry.parentPath, entry.name);
    const info = await stat(path);
    found[path.slice(root.length + 1)] =
      `${info.ino} ${info.mtimeMs} ${sha256Of(await readFile(path))}`;
  }
  return found;
}

describe.skipIf(sshd === undefined)("destination repair over SFTP", () => {
  it("audit finds a deleted, a truncated and a replaced output; run --repair restores them", async () => {
    const source = join(tmp(), "src");
    await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
    const { root, config } = await sshSetup(source);
    const published = await runCli(["run", "--config", config]);
    expect(published.code, published.stderr).toBe(0);
    const clean = await runCli(["audit", "--config", config]);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);

    await rm(join(root, "report.md"));
    await writeFile(join(root, "data/summary.txt"), "Summ");
    await writeFile(join(root, "data/table.csv"), "a,b\n9,9\n");
    const drifted = await runCli(["audit", "--config", config]);
    expect(drifted.code).toBe(1);
    expect(drifted.stdout).toContain(
      "Audit: pipeline=reports destination=remote bundle=. status=drift checked=3 ok=0 missing=1 changed=2 unmanaged=0",
    );

    const repaired = await runCli(["run", "--config", config, "--repair"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(repaired.stdout).toContain("action=repair status=published outputs=3");
    for (const [path, text] of Object.entries(FILES)) {
      expect(await readFile(join(root, path), "utf8")).toBe(text);
    }
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(audited.stdout).toContain("status=ok checked=3 ok=3 missing=0 changed=0");
  }, 60_000);

  it.skipIf(rsyncSkipped)(
    "adopts what rsync -a over ssh copied, writing no output",
    async () => {
      const source = join(tmp(), "src");
      await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
      const { root, config, knownHosts, selector } = await sshSetup(source);
      const s = server();
      const ssh = `ssh -i ${s.clientKeyFile} -p ${s.port} -o UserKnownHostsFile=${knownHosts} -o StrictHostKeyChecking=yes -o BatchMode=yes`;
      await execTool("rsync", [
        ...["-a", "-e", ssh, "--exclude", "/manifest.json"],
        `${source}/`,
        `${s.user}@${s.host}:${root}/`,
      ]);
      const before = await fileIdentities(root);
      expect(Object.keys(before).sort()).toEqual(Object.keys(FILES).sort());

      const adopted = await runCli(["reconcile-state", ...selector, "--adopt", "--format", "json"]);
      expect(adopted.code, adopted.stderr).toBe(0);
      const [bundle] = resultOf(adopted).bundles as Array<{ adopted_outputs: unknown[] }>;
      expect(bundle?.adopted_outputs).toHaveLength(3);
      expect(await fileIdentities(root)).toEqual(before);
      const run = await runCli(["run", "--config", config]);
      expect(run.stdout).toContain("action=skip_same status=skipped");
      const audited = await runCli(["audit", "--config", config]);
      expect(audited.code, audited.stdout).toBe(0);
    },
    60_000,
  );

  it("rebuilds a corrupted state from the source and the bytes present", async () => {
    const source = join(tmp(), "src");
    await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
    const { root, config, selector } = await sshSetup(source);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeFile(join(root, ".distributor.json"), '{"schema_version": 2, "trunc');
    const audit = await runCli(["audit", "--config", config]);
    expect(audit.code).toBe(1);

    const before = await fileIdentities(root);
    const rebuilt = await runCli(["reconcile-state", ...selector, "--rebuild"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(rebuilt.stdout).toContain("mode=rebuild bundle=. status=changed adopted=3");
    expect(await fileIdentities(root)).toEqual(before);
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
  }, 60_000);

  it("prunes an archive of 30 bundle paths to the newest 10", async () => {
    const source = join(tmp(), "src");
    const day = (n: number) => `2026-06-${String(n).padStart(2, "0")}`;
    for (let n = 1; n <= 30; n++) {
      await writeBundle(join(source, day(n)), "reports.daily", `${day(n)}T06:00:00Z`, {
        "report.md": `# Day ${n}\n`,
      });
    }
    const { root, config, selector } = await sshSetup(
      source,
      "        retention: {prune: {enabled: true, keep_latest: 10}}\n",
    );
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const dry = await runCli(["prune", ...selector, "--dry-run"]);
    expect(dry.stdout).toContain("unit=bundles checked=30 planned=20 deleted=0 preserved=10");
    expect((await readdir(root)).length).toBe(30);

    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      "status=changed unit=bundles checked=30 planned=20 deleted=20 preserved=10",
    );
    const kept = Array.from({ length: 10 }, (_, i) => day(21 + i));
    expect((await readdir(root)).sort()).toEqual(kept);
    for (const name of kept) {
      expect((await readdir(join(root, name))).sort()).toEqual([".distributor.json", "report.md"]);
    }
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
  }, 120_000);
});
