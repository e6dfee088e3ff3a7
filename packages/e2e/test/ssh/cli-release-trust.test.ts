import { mkdtemp, readFile, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  envelopeOf,
  ownerFlags,
  releaseIds,
  resultOf,
  runCli,
  TRUST_FILES_A,
  TRUST_FILES_B,
  useTempDir,
  writeBundle,
} from "@distributor/cli/testing";
import { startSshd, type TestSshd } from "@distributor/storage-ssh/testing";
import { afterAll, describe, expect, it } from "vitest";

// The release-trust cases of release-trust.test.ts over SFTP (a real OpenSSH server on loopback,
// whose files the test edits directly, as an operator logged in there would): an edit in place
// reaches every release sharing the hard link and is found, refused and rewritten; a corrupt
// state is restored from the snapshot `current` links to; a layout mismatch is
// `unsupported_layout` from every command. Over SFTP a file's identity is its size and its
// modification time to the second, so the edit is made a second after the release.

const ci = process.env.CI;
const required = ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
let sshd: TestSshd | undefined;
try {
  sshd = await startSshd();
} catch (error) {
  if (required) throw error;
  console.warn(`CLI SSH release-trust tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await sshd?.stop();
});

const tmp = useTempDir();

function server(): TestSshd {
  if (sshd === undefined) throw new Error("sshd is not running");
  return sshd;
}

const FILES_A = TRUST_FILES_A;
const FILES_B = TRUST_FILES_B;

async function sshConfig(
  source: string,
  root: string,
  layout = "layout: releases",
): Promise<string> {
  const s = server();
  const knownHosts = join(tmp(), "known_hosts");
  await writeFile(knownHosts, s.knownHostsLine);
  const path = join(tmp(), `${layout === "" ? "in-place" : "releases"}.yml`);
  await writeFile(
    path,
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: ssh\n        host: ${s.host}\n        port: ${s.port}\n        user: ${s.user}\n        path: ${root}\n        private_key_file: ${s.clientKeyFile}\n        known_hosts_file: ${knownHosts}\n        host_key_policy: strict\n        path_mapping: {mode: fixed}\n        ${layout}\n`,
  );
  return path;
}

describe.skipIf(sshd === undefined)("release history over SFTP", () => {
  it("rewrites an edited file, audits every release and refuses to roll back to it unless forced", async () => {
    const source = join(tmp(), "src");
    const root = await mkdtemp(join(server().sftpRoot, "trust-"));
    const config = await sshConfig(source, root);
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [first] = await releaseIds(root);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await writeFile(join(root, "current/assets/f2.txt"), "file 2Z");

    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    const published = await runCli(["run", "--config", config, "--format", "json"]);
    expect(published.code, published.stderr).toBe(0);
    const [action] = resultOf(published).actions as Array<{
      warnings: Array<{ code: string; paths: string[] }>;
    }>;
    expect(action?.warnings).toEqual([
      expect.objectContaining({ code: "release_files_rewritten", paths: ["assets/f2.txt"] }),
    ]);
    expect(await readFile(join(root, "current/assets/f2.txt"), "utf8")).toBe("file 2\n");
    const second = (await releaseIds(root)).find((id) => id !== first) as string;

    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code).toBe(1);
    expect(audited.stdout).toContain(
      `Drift: pipeline=site destination=www bundle=. release=${first} path=assets/f2.txt status=changed`,
    );
    const refused = await runCli([
      "rollback",
      ...ownerFlags(config),
      "--previous",
      "--format",
      "json",
    ]);
    expect(refused.code).toBe(1);
    expect(envelopeOf(refused).error?.code).toBe("release_drift");
    expect(await readlink(join(root, "current"))).toBe(`releases/${second}`);
    const forced = await runCli(["rollback", ...ownerFlags(config), "--previous", "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain("forced=true");
    expect(await readlink(join(root, "current"))).toBe(`releases/${first}`);
  }, 120_000);

  it("restores a corrupt state from the snapshot current links to", async () => {
    const source = join(tmp(), "src");
    const root = await mkdtemp(join(server().sftpRoot, "corrupt-"));
    const config = await sshConfig(source, root);
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [only] = await releaseIds(root);
    await writeFile(join(root, ".distributor.json"), "{ not json");
    const run = await runCli(["run", "--config", config, "--format", "json"]);
    const [action] = resultOf(run).actions as Array<{ error: { code: string } }>;
    expect(action?.error.code).toBe("state_invalid");
    const rebuilt = await runCli(["reconcile-state", ...ownerFlags(config), "--rebuild"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(await readFile(join(root, ".distributor.json"))).toEqual(
      await readFile(join(root, "releases", `${only}.json`)),
    );
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
  }, 120_000);

  it("refuses a layout mismatch with unsupported_layout", async () => {
    const source = join(tmp(), "src");
    const root = await mkdtemp(join(server().sftpRoot, "layout-"));
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    const inPlace = await sshConfig(source, root, "");
    expect((await runCli(["run", "--config", inPlace])).code).toBe(0);
    const releases = await sshConfig(source, root);
    const run = await runCli(["run", "--config", releases, "--format", "json"]);
    const [action] = resultOf(run).actions as Array<{ error: { code: string } }>;
    expect(action?.error.code).toBe("unsupported_layout");
    const audit = await runCli(["audit", "--config", releases, "--format", "json"]);
    expect(audit.code).toBe(1);
    const destinations = resultOf(audit).destinations as Array<{ error: { code: string } }>;
    expect(destinations[0]?.error.code).toBe("unsupported_layout");
    const rollback = await runCli([
      "rollback",
      ...ownerFlags(releases),
      "--previous",
      "--format",
      "json",
    ]);
    expect(envelopeOf(rollback).error?.code).toBe("unsupported_layout");
  }, 120_000);
});
