import { spawn } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  BIN,
  type CliResult,
  resultOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  useTempDir,
  writeBundle,
  writeFiles,
} from "./helpers.js";

// The commit protocol (docs/design/commit-protocol.md) with real processes on the local backend: concurrent runs lose no
// record, and a run killed with SIGKILL is followed by a plain run that succeeds.

const tmp = useTempDir();
const LOOP = fileURLToPath(new URL("./fixtures/concurrency/publish-loop.mjs", import.meta.url));

const sha = sha256Of;
const bundle = writeBundle;

/** Every file below `root` with its digest. */
async function files(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else found[relative(root, path)] = sha(await readFile(path));
    }
  };
  await visit(root);
  return found;
}

/** The state at `root` records exactly the files on disk (with their digests), and nothing else lies there. */
async function expectStateMatchesFiles(root: string) {
  const onDisk = await files(root);
  const state = JSON.parse(await readFile(join(root, ".distributor.json"), "utf8")) as {
    outputs: Array<{ path: string; sha256: string }>;
  };
  delete onDisk[".distributor.json"];
  expect(onDisk).toEqual(Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256])));
}

function spawnCli(args: string[]): {
  done: Promise<CliResult>;
  kill: (signal?: NodeJS.Signals) => void;
} {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const done = new Promise<CliResult>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
  return { done, kill: (signal = "SIGKILL") => child.kill(signal) };
}

const config = singlePipelineConfig;

describe("concurrent runs", () => {
  it("two owners publishing into one shared root for 50 rounds lose no record", async () => {
    const dest = join(tmp(), "site");
    const configPath = join(tmp(), "distributor.yml");
    const owner = (id: string) =>
      `  - id: ${id}\n    source: {backend: local, path: ${join(tmp(), id)}}\n    destinations:\n      - {id: site, backend: local, path: ${dest}, state: {mode: shared_root}}\n`;
    await writeFile(configPath, `pipelines:\n${owner("alpha")}${owner("beta")}`);

    const loops = ["alpha", "beta"].map(
      (id) =>
        new Promise<{ published: number; failures: unknown[] }>((resolve, reject) => {
          const child = spawn(
            process.execPath,
            [LOOP, configPath, id, join(tmp(), id), "50", dest],
            {
              cwd: fileURLToPath(new URL("..", import.meta.url)),
              stdio: ["ignore", "pipe", "pipe"],
            },
          );
          let out = "";
          let err = "";
          child.stdout.setEncoding("utf8").on("data", (c: string) => {
            out += c;
          });
          child.stderr.setEncoding("utf8").on("data", (c: string) => {
            err += c;
          });
          child.on("error", reject);
          child.on("close", (code) => {
            if (code !== 0) reject(new Error(`${id} exited ${code}: ${err.slice(-2000)}`));
            else resolve(JSON.parse(out));
          });
        }),
    );
    const [alpha, beta] = await Promise.all(loops);

    // The failures' whole text in the message's first line: a rare failure must say what it was.
    expect(alpha?.failures, `alpha: ${JSON.stringify(alpha?.failures)}`).toEqual([]);
    expect(beta?.failures, `beta: ${JSON.stringify(beta?.failures)}`).toEqual([]);
    expect(alpha?.published).toBe(50);
    expect(beta?.published).toBe(50);
    const state = JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));
    const owners = state.owners as Array<{
      pipeline_id: string;
      source: { manifest: { created: string } };
    }>;
    expect(
      Object.fromEntries(owners.map((o) => [o.pipeline_id, o.source.manifest.created])),
    ).toEqual({
      alpha: "2026-06-04T00:50:00Z",
      beta: "2026-06-04T00:50:00Z",
    });
    await expectStateMatchesFiles(dest);
  }, 120_000);

  it("three simultaneous runs of one pipeline leave a state recording exactly the files on disk", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(configPath, config(source, dest));
    for (let round = 1; round <= 8; round++) {
      const files: Record<string, string> = { "index.md": `# Round ${round}\n` };
      for (let i = 0; i < 12; i++)
        files[`data/${(round + i) % 16}.txt`] = `round ${round} file ${i}\n`;
      await bundle(source, "reports", new Date(Date.UTC(2026, 5, 4, round)).toISOString(), files);

      const runs = Array.from({ length: 3 }, () =>
        spawnCli(["run", "--config", configPath, "--lock-timeout", "60s", "--format", "json"]),
      );
      const results = await Promise.all(runs.map((r) => r.done));

      for (const result of results) expect(result.code, result.stderr + result.stdout).toBe(0);
      const statuses = results.map(
        (r) => (resultOf(r).actions as Array<{ status: string }>)[0]?.status,
      );
      // Exactly one publishes; the others waited for its lease and found the same source.
      expect(statuses.filter((s) => s === "published")).toHaveLength(1);
      expect(statuses.filter((s) => s === "skipped")).toHaveLength(2);
      await expectStateMatchesFiles(dest);
    }
  }, 120_000);

  it("without --lock-timeout the losing run fails at once, naming the lease holder", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(configPath, config(source, dest));
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "a.txt": "a\n" });
    await writeFiles(dest, {
      ".distributor.lease.json": JSON.stringify({
        format: "distributor-lease/1",
        owner: { pipeline_id: "reports", destination_id: "archive" },
        run_id: "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5",
        host: "other-host.example",
        pid: 31337,
        acquired_at: new Date().toISOString(),
        expires_at: new Date(Date.now() + 120_000).toISOString(),
        journal: [],
        directories: [""],
      }),
    });

    const result = await runCli(["run", "--config", configPath]);

    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "is held by run 0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5 of reports/archive",
    );
    expect(result.stderr).toContain("host other-host.example (pid 31337)");
    expect(result.stderr).toContain("raise --lock-timeout");
  });
});

describe("--lock-timeout with a negative value", () => {
  it("says the same for `--lock-timeout -5s` as for `--lock-timeout=-5s`, and writes nothing", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(configPath, config(source, dest));
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "a.txt": "a\n" });

    const joined = await runCli(["run", "--config", configPath, "--lock-timeout=-5s"]);
    const separate = await runCli(["run", "--config", configPath, "--lock-timeout", "-5s"]);

    expect(joined).toEqual({
      code: 2,
      stdout: "",
      stderr: 'distributor: --lock-timeout "-5s" must not be negative\n',
    });
    expect(separate).toEqual(joined);
    const json = await runCli([
      "run",
      "--config",
      configPath,
      "--lock-timeout",
      "-5s",
      "--format",
      "json",
    ]);
    expect(json.code).toBe(2);
    expect(json.stderr).toBe(joined.stderr);
    await expect(readdir(dest)).rejects.toThrow("ENOENT");
  });
});

describe("a run killed with SIGKILL", () => {
  const many = (version: string) =>
    Object.fromEntries(
      Array.from({ length: 400 }, (_, i) => [
        `data/${String(i).padStart(3, "0")}.txt`,
        `${version} ${i} ${"x".repeat(16_000)}\n`,
      ]),
    );

  for (const replace of [false, true]) {
    it(`mid-${replace ? "replacement" : "publication"} is followed by a plain run that succeeds`, async () => {
      const source = join(tmp(), "src");
      const dest = join(tmp(), "dest");
      const configPath = join(tmp(), "distributor.yml");
      await writeFile(configPath, config(source, dest));
      if (replace) {
        await bundle(source, "reports", "2026-06-04T09:00:00Z", many("v1"));
        expect((await runCli(["run", "--config", configPath])).code).toBe(0);
      }
      await bundle(source, "reports", "2026-06-04T10:00:00Z", many("v2"));

      const victim = spawnCli(["run", "--config", configPath]);
      // Kill it once it has visibly started writing the new version.
      const deadline = Date.now() + 20_000;
      for (;;) {
        const leased = await readFile(join(dest, ".distributor.lease.json")).then(
          () => true,
          () => false,
        );
        const first = await readFile(join(dest, "data", "000.txt"), "utf8").catch(() => "");
        if (leased && first.startsWith("v2")) break;
        if (Date.now() > deadline) throw new Error("the run never started writing");
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      victim.kill();
      const killed = await victim.done;
      expect(killed.code).toBeNull();

      if (!replace) {
        // What the killed first publication left is visible: a lease where no state is yet.
        const shown = await runCli([
          "inspect",
          "--config",
          configPath,
          "--pipeline",
          "reports",
          "--destination",
          "archive",
        ]);
        expect(shown.code, shown.stderr).toBe(0);
        expect(shown.stdout).toMatch(/^Lease: path=\. state=none owner=reports\/archive /m);
        const audited = await runCli(["audit", "--config", configPath]);
        expect(audited.code).toBe(1);
        expect(audited.stdout).toMatch(
          /^Lease: pipeline=reports destination=archive bundle=\. state=none /m,
        );
        expect(audited.stderr).toContain("lease(s) where no state is");
      }

      const after = await runCli(["run", "--config", configPath, "--format", "json"]);
      expect(after.code, after.stdout).toBe(0);
      const [action] = resultOf(after).actions as Array<{ action: string; status: string }>;
      expect(action?.status).toBe("published");
      await expectStateMatchesFiles(dest);
      const onDisk = await files(dest);
      expect(Object.keys(onDisk).length).toBe(401);
      expect(onDisk["data/000.txt"]).toBe(sha(many("v2")["data/000.txt"] as string));
    }, 60_000);
  }

  it("interrupted with SIGTERM removes what it created and leaves an expired lease journaling the rest", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(configPath, config(source, dest));
    await bundle(source, "reports", "2026-06-04T10:00:00Z", many("v1"));

    const victim = spawnCli(["run", "--config", configPath, "--format", "json"]);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const names = await readdir(join(dest, "data")).catch(() => [] as string[]);
      if (names.length > 10) break;
      if (Date.now() > deadline) throw new Error("the run never started writing");
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    victim.kill("SIGTERM");
    const stopped = await victim.done;

    expect(stopped.code).toBe(1);
    const envelope = JSON.parse(stopped.stdout);
    expect(envelope.error.code).toBe("aborted");
    // The whole result, not null: the interrupted action is there, failed (docs/cli.md).
    expect(envelope.result.interrupted).toBe(true);
    expect(envelope.result.actions).toHaveLength(1);
    expect(envelope.result.actions[0]).toMatchObject({ status: "failed", action: "publish_new" });
    expect(envelope.result.actions[0].error.code).toBe("aborted");
    expect(envelope.result.actions[0].error.message).toContain("interrupted by SIGTERM");
    // Before the commit the journal is kept, never dropped (docs/design/commit-protocol.md): the lease stays, already
    // expired, and lists whatever of this attempt may still be there (writes cut off mid-way).
    const left = await files(dest);
    expect(Object.keys(left)).toContain(".distributor.lease.json");
    const lease = JSON.parse(await readFile(join(dest, ".distributor.lease.json"), "utf8"));
    expect(Date.parse(lease.expires_at)).toBeLessThanOrEqual(Date.now());
    for (const path of Object.keys(left)) {
      if (path !== ".distributor.lease.json") expect(lease.journal).toContain(path);
    }
    const after = await runCli(["run", "--config", configPath]);
    expect(after.code, after.stderr).toBe(0);
    await expectStateMatchesFiles(dest);
  }, 60_000);
});
