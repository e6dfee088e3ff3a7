import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { BIN, resultOf, runCli, useTempDir, writeFiles } from "@distributor/cli/testing";
import { isTempFileFor, LEASE_FILE_NAME } from "@distributor/storage";
import { startSshd, type TestSshd } from "@distributor/storage-ssh/testing";
import { afterAll, describe, expect, it } from "vitest";

// A real OpenSSH server on loopback for the whole file. Under CI a missing sshd fails the suite;
// elsewhere the suite is skipped with the reason.
const ci = process.env.CI;
const required = ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
let sshd: TestSshd | undefined;
try {
  sshd = await startSshd();
} catch (error) {
  if (required) throw error;
  console.warn(`CLI SSH tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await sshd?.stop();
});

const tmp = useTempDir();

function server(): TestSshd {
  if (sshd === undefined) throw new Error("sshd is not running");
  return sshd;
}

/** Every file below `root` with its bytes (what the server holds, read from its filesystem). */
async function tree(root: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else files[relative(root, path)] = await readFile(path, "utf8");
    }
  };
  await visit(root).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOENT") throw error;
  });
  return files;
}

async function bundle(dir: string, id: string, created: string, files: Record<string, string>) {
  await rm(dir, { recursive: true, force: true });
  await writeFiles(dir, files);
  const made = await runCli(["manifest", "create", "--id", id, "--created", created, dir]);
  expect(made.code, made.stderr).toBe(0);
}

interface SshKeys {
  root: string;
  knownHostsFile: string;
  policy?: "strict" | "accept_new";
  extra?: string;
  /** Another server than the file's shared one. */
  on?: TestSshd;
}

function sshFields(
  { root, knownHostsFile, policy = "strict", extra = "", on }: SshKeys,
  indent: string,
) {
  const s = on ?? server();
  return [
    "backend: ssh",
    `host: ${s.host}`,
    `port: ${s.port}`,
    `user: ${s.user}`,
    `path: ${root}`,
    `private_key_file: ${s.clientKeyFile}`,
    `known_hosts_file: ${knownHostsFile}`,
    `host_key_policy: ${policy}`,
    ...extra.split("\n").filter((line) => line !== ""),
  ]
    .map((line) => `${indent}${line}\n`)
    .join("");
}

/** A config publishing the local `source` to an SSH destination. */
async function sshConfig(source: string, keys: SshKeys, pipelines = ["reports"]) {
  const path = join(tmp(), "distributor.yml");
  const text = pipelines
    .map(
      (id, index) =>
        `  - id: ${id}\n    source: {backend: local, path: ${index === 0 ? source : `${source}-${id}`}}\n    destinations:\n      - id: remote\n${sshFields(keys, "        ")}`,
    )
    .join("");
  await writeFile(path, `pipelines:\n${text}`);
  return path;
}

async function trustingKnownHosts(): Promise<string> {
  const file = join(tmp(), "known_hosts");
  await writeFile(file, server().knownHostsLine);
  return file;
}

async function freshRoot(): Promise<string> {
  return mkdtemp(join(server().sftpRoot, "cli-"));
}

const TEMP = /\.distributor\.[0-9a-f]{16}\.tmp/;

/**
 * Temp files recovery must have removed. A lease write's temp younger than a minute is kept on
 * purpose (another run may be taking the lease right now), and the killed run may have been
 * renewing its lease; every other temp name is debris.
 */
function debris(names: readonly string[]): string[] {
  return names.filter((name) => TEMP.test(name) && !isTempFileFor(name, LEASE_FILE_NAME));
}

describe.skipIf(sshd === undefined)("distributor with an SSH destination", () => {
  it("publishes local → SSH, skips the same bundle, and replaces an older one", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", {
      "report.md": "# One\n",
      "old/notes.txt": "old notes\n",
    });
    const configPath = await sshConfig(source, { root, knownHostsFile });

    const first = await runCli(["run", "--config", configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(
      "destination=remote bundle=. source=reports.daily action=publish_new status=published outputs=2",
    );
    const published = await tree(root);
    expect(published["report.md"]).toBe("# One\n");
    expect(published["old/notes.txt"]).toBe("old notes\n");
    const state = JSON.parse(published[".distributor.json"] as string);
    expect(state.source.manifest.id).toBe("reports.daily");
    expect(state.outputs.map((output: { path: string }) => output.path)).toEqual([
      "old/notes.txt",
      "report.md",
    ]);

    const again = await runCli(["run", "--config", configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("action=skip_same");
    expect(await tree(root)).toEqual(published);

    await bundle(source, "reports.daily", "2026-06-02T00:00:00Z", { "report.md": "# Two\n" });
    const replaced = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(JSON.stringify(resultOf(replaced))).toContain('"action":"replace_older"');
    const after = await tree(root);
    expect(Object.keys(after).sort()).toEqual([".distributor.json", "report.md"]);
    expect(after["report.md"]).toBe("# Two\n");
    expect(Object.keys(after).some((path) => TEMP.test(path))).toBe(false);
  });

  it("merges an older publication's outputs with reconciliation merge", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    const configPath = await sshConfig(source, {
      root,
      knownHostsFile,
      extra: "reconciliation: {mode: merge}",
    });
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", { "a.md": "# A\n" });
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await bundle(source, "reports.daily", "2026-06-02T00:00:00Z", { "b.md": "# B\n" });
    const merged = await runCli(["run", "--config", configPath]);
    expect(merged.code, merged.stderr).toBe(0);
    const after = await tree(root);
    expect(after["a.md"]).toBe("# A\n");
    expect(after["b.md"]).toBe("# B\n");
    const state = JSON.parse(after[".distributor.json"] as string);
    expect(state.outputs.map((output: { path: string }) => output.path).sort()).toEqual([
      "a.md",
      "b.md",
    ]);
  });

  it("lets two owners race into one shared root without losing a record", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    const pipelines = ["first", "second"];
    const configPath = await sshConfig(
      source,
      { root, knownHostsFile, extra: "state: {mode: shared_root}" },
      pipelines,
    );
    await bundle(source, "reports.first", "2026-06-01T00:00:00Z", { "first.md": "# First\n" });
    await bundle(`${source}-second`, "reports.second", "2026-06-01T00:00:00Z", {
      "second.md": "# Second\n",
    });
    // Both take the root's lease in turn (the second waits for the first) and both succeed.
    const raced = await Promise.all(
      pipelines.map((id) =>
        runCli(["run", "--config", configPath, "--pipeline", id, "--lock-timeout", "60s"]),
      ),
    );
    for (const result of raced) expect(result.code, result.stderr).toBe(0);
    const after = await tree(root);
    const state = JSON.parse(after[".distributor.json"] as string);
    expect(state.schema_version).toBe(3);
    expect(state.owners.map((owner: { pipeline_id: string }) => owner.pipeline_id).sort()).toEqual(
      pipelines,
    );
    expect(after["first.md"]).toBe("# First\n");
    expect(after["second.md"]).toBe("# Second\n");
  });

  it("runs reconcile-state and prune --apply against the server", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    const configPath = await sshConfig(source, {
      root,
      knownHostsFile,
      extra:
        "reconciliation: {mode: merge}\nretention: {prune: {enabled: true, keep_latest: 0, older_than: 1h}}",
    });
    // A first bundle, then a second that drops old.txt: merge keeps it, and only it is prunable.
    await bundle(source, "reports.daily", "2026-05-31T00:00:00Z", { "old.txt": "Old\n" });
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await rm(join(source, "old.txt"));
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", {
      "report.md": "# Report\n",
      "summary.txt": "Summary\n",
    });
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "remote"];

    await rm(join(root, "summary.txt"));
    await writeFile(join(root, "extra.txt"), "hand-placed\n");
    const reconciled = await runCli(["reconcile-state", ...selector]);
    expect(reconciled.code, reconciled.stderr).toBe(0);
    expect(reconciled.stdout).toMatch(
      /^Reconcile state: pipeline=reports destination=remote backend=ssh root=\S+ status=changed checked=3 missing=1 unmanaged=1 dry_run=false\n$/,
    );
    const statePath = join(root, ".distributor.json");
    const state = JSON.parse(await readFile(statePath, "utf8"));
    expect(state.outputs.map((output: { path: string }) => output.path).sort()).toEqual([
      "old.txt",
      "report.md",
    ]);

    for (const output of state.outputs) output.updated_at = "2026-01-01T00:00:00Z";
    await writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`);
    const pruned = await runCli(["prune", ...selector, "--apply"]);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain(
      "status=changed checked=1 planned=1 deleted=1 preserved=0 dry_run=false",
    );
    // The publication in force (report.md) stays, however old its record says it is.
    expect(await tree(root)).toEqual({
      ".distributor.json": expect.any(String),
      "extra.txt": "hand-placed\n",
      "report.md": "# Report\n",
    });
  });

  it("a 1 000-file run, its audit and a repair print nothing on stderr under --format json", async () => {
    const source = join(tmp(), "many");
    const files = Object.fromEntries(
      Array.from({ length: 1000 }, (_, i) => [`d${i % 10}/f${i}.txt`, `${i}\n`]),
    );
    await bundle(source, "reports.many", "2026-06-04T09:00:00Z", files);
    const root = await freshRoot();
    const configPath = await sshConfig(source, {
      root,
      knownHostsFile: await trustingKnownHosts(),
    });
    for (const args of [["run"], ["audit"], ["run", "--repair"]]) {
      const result = await runCli([...args, "--config", configPath, "--format", "json"]);
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0);
      expect(result.stderr, args.join(" ")).toBe("");
    }
  }, 120_000);

  it("publishes SSH → local", async () => {
    const remoteSource = await freshRoot();
    await bundle(remoteSource, "reports.remote", "2026-06-01T00:00:00Z", {
      "report.md": "# Remote\n",
      "deep/data.txt": "data\n",
    });
    const dest = join(tmp(), "dest");
    const knownHostsFile = await trustingKnownHosts();
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(
      configPath,
      `pipelines:\n  - id: pull\n    source:\n${sshFields({ root: remoteSource, knownHostsFile }, "      ")}    destinations:\n      - id: here\n        backend: local\n        path: ${dest}\n`,
    );
    const result = await runCli(["run", "--config", configPath]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(
      "source=reports.remote action=publish_new status=published outputs=2",
    );
    const local = await tree(dest);
    expect(local["report.md"]).toBe("# Remote\n");
    expect(local["deep/data.txt"]).toBe("data\n");
  });

  it("run --dry-run with accept_new leaves known_hosts absent or byte-identical", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", { "report.md": "# R\n" });
    const knownHostsFile = join(tmp(), "ssh", "known_hosts");
    const configPath = await sshConfig(source, { root, knownHostsFile, policy: "accept_new" });

    const absent = await runCli(["run", "--config", configPath, "--dry-run"]);
    expect(absent.code, absent.stderr).toBe(0);
    expect(absent.stdout).toContain("action=publish_new");
    await expect(stat(knownHostsFile)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await tree(root)).toEqual({});

    const other = "# someone else's host\nother.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOb1\n";
    await writeFiles(join(tmp(), "ssh"), { known_hosts: other });
    const before = await readFile(knownHostsFile);
    const present = await runCli(["run", "--config", configPath, "--dry-run"]);
    expect(present.code, present.stderr).toBe(0);
    expect((await readFile(knownHostsFile)).equals(before)).toBe(true);

    // A real run records the key once.
    const real = await runCli(["run", "--config", configPath]);
    expect(real.code, real.stderr).toBe(0);
    expect(await readFile(knownHostsFile, "utf8")).toBe(`${other}${server().knownHostsLine}`);
  });

  it("fails on an unknown host key under strict, names the fingerprint, and writes nothing", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", { "report.md": "# R\n" });
    const knownHostsFile = join(tmp(), "known_hosts");
    await writeFile(knownHostsFile, "");
    const configPath = await sshConfig(source, { root, knownHostsFile });
    const result = await runCli(["run", "--config", configPath]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`host 127.0.0.1 port ${server().port}`);
    expect(result.stderr).toMatch(/SHA256:[A-Za-z0-9+/]{43}(?!=)/);
    expect(await readFile(knownHostsFile, "utf8")).toBe("");
    expect(await tree(root)).toEqual({});
  });

  // A killed run leaves its temp file and lease on the server; the next run's recovery (docs/design/commit-protocol.md)
  // deletes what the journal names and then publishes as usual.
  it("recovers after the CLI is killed in the middle of a large upload", async () => {
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    await rm(source, { recursive: true, force: true });
    await writeFiles(source, { "small.md": "# Small\n" });
    await writeFile(join(source, "big.bin"), Buffer.alloc(256 * 1024 * 1024, 7));
    const made = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.big",
      "--created",
      "2026-06-01T00:00:00Z",
      source,
    ]);
    expect(made.code, made.stderr).toBe(0);
    const configPath = await sshConfig(source, { root, knownHostsFile });

    const child = spawn(process.execPath, [BIN, "run", "--config", configPath], {
      stdio: "ignore",
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    let sawTemp = false;
    for (let attempt = 0; attempt < 400 && !sawTemp; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      sawTemp = (await readdir(root)).some((name) => TEMP.test(name));
    }
    child.kill("SIGKILL");
    await exited;
    expect(sawTemp).toBe(true);
    await expect(stat(join(root, "big.bin"))).rejects.toMatchObject({ code: "ENOENT" });

    const next = await runCli(["run", "--config", configPath]);
    expect(next.code, next.stderr).toBe(0);
    const after = await readdir(root);
    expect(debris(after)).toEqual([]);
    expect((await stat(join(root, "big.bin"))).size).toBe(256 * 1024 * 1024);
  }, 120_000);

  it("fails clearly when sshd dies mid-publish, and the next run recovers", async () => {
    const own = await startSshd();
    let restarted: TestSshd | undefined;
    try {
      const source = join(tmp(), "src");
      const root = own.sftpRoot;
      const knownHostsFile = join(tmp(), "own_known_hosts");
      await writeFile(knownHostsFile, own.knownHostsLine);
      await rm(source, { recursive: true, force: true });
      await writeFiles(source, { "small.md": "# Small\n" });
      await writeFile(join(source, "big.bin"), Buffer.alloc(256 * 1024 * 1024, 9));
      const made = await runCli([
        "manifest",
        "create",
        "--id",
        "reports.big",
        "--created",
        "2026-06-01T00:00:00Z",
        source,
      ]);
      expect(made.code, made.stderr).toBe(0);
      const configPath = await sshConfig(source, { root, knownHostsFile, on: own });

      const running = runCli(["run", "--config", configPath]);
      for (let attempt = 0; attempt < 400; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        if ((await readdir(root)).some((name) => TEMP.test(name))) break;
      }
      await own.kill();
      const failed = await running;
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain(`connection to ${own.user}@127.0.0.1:${own.port} was lost`);
      await expect(stat(join(root, "big.bin"))).rejects.toMatchObject({ code: "ENOENT" });

      restarted = await startSshd({
        port: own.port,
        hostKeyFile: own.hostKeyFile,
        directory: own.directory,
      });
      const next = await runCli(["run", "--config", configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect(next.stdout).toContain("action=publish_new status=published outputs=2");
      expect(debris(await readdir(root))).toEqual([]);
      expect((await stat(join(root, "big.bin"))).size).toBe(256 * 1024 * 1024);
    } finally {
      await restarted?.stop();
      await own.stop();
    }
  }, 120_000);

  it("authenticates with an encrypted key from the environment and its passphrase from secrets.directory", async () => {
    const s = server();
    const keyFile = join(tmp(), "locked_key");
    // A copy of the client key, re-encrypted with a passphrase.
    await writeFile(keyFile, await readFile(s.clientKeyFile), { mode: 0o600 });
    await promisify(execFile)("ssh-keygen", [
      "-q",
      "-p",
      "-P",
      "",
      "-N",
      "open sesame",
      "-f",
      keyFile,
    ]);
    const secrets = join(tmp(), "secrets");
    await writeFiles(secrets, { SSH_TEST_PASSPHRASE: "open sesame\n" });
    const source = join(tmp(), "src");
    const root = await freshRoot();
    const knownHostsFile = await trustingKnownHosts();
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", { "report.md": "# R\n" });
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(
      configPath,
      `secrets: {directory: ${secrets}}\npipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: remote\n        backend: ssh\n        host: ${s.host}\n        port: ${s.port}\n        user: ${s.user}\n        path: ${root}\n        private_key_env: SSH_TEST_KEY\n        passphrase_env: SSH_TEST_PASSPHRASE\n        known_hosts_file: ${knownHostsFile}\n`,
    );
    const key = await readFile(keyFile, "utf8");
    const published = await runCli(["run", "--config", configPath], { env: { SSH_TEST_KEY: key } });
    expect(published.code, published.stderr).toBe(0);
    expect(await readFile(join(root, "report.md"), "utf8")).toBe("# R\n");

    // Without the passphrase the key cannot be used: a permission error naming the problem.
    await writeFiles(secrets, { SSH_TEST_PASSPHRASE: "wrong words\n" });
    const refused = await runCli(["run", "--config", configPath, "--format", "json"], {
      env: { SSH_TEST_KEY: key },
    });
    expect(refused.code).toBe(1);
    const [action] = resultOf(refused).actions as {
      status: string;
      error: { code: string; message: string };
    }[];
    expect(action?.status).toBe("failed");
    expect(action?.error.code).toBe("permission_denied");
    expect(action?.error.message).toContain("the private key cannot be used");
    expect(action?.error.message).toContain("bad passphrase");
    expect(refused.stdout).not.toContain("OPENSSH PRIVATE KEY");
  });
});
