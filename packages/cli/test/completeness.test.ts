import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BIN,
  type CliResult,
  envelopeOf,
  resultOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  useTempDir,
  writeBundle,
} from "./helpers.js";

// What a success report promises (docs/operations.md): after an exit 0 the destination holds the
// whole publication of the source its state records, under the configuration in force. Real CLI
// processes on the local backend: an interrupted replacement rolled back to the older source, the
// HTML output turned on and off, a record removed from the state, and prune beside the
// publication in force.

const tmp = useTempDir();

interface Action {
  action: string | null;
  status: string;
  reason: string;
  outputs: Array<{ path: string; kind: string }>;
}

interface StateRecord {
  path: string;
  sha256: string;
  kind: string;
  updated_at: string;
}

interface State {
  source: { manifest: { id: string; created: string; digest: string } };
  outputs: StateRecord[];
}

/** The single action of a one-destination `run --format json`. */
function actionOf(result: CliResult): Action {
  const actions = resultOf(result).actions as Action[];
  expect(actions).toHaveLength(1);
  return actions[0] as Action;
}

/** Every file below `root` with its digest (the state and lease files included). */
async function files(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else found[relative(root, path)] = sha256Of(await readFile(path));
    }
  };
  await visit(root);
  return found;
}

async function stateOf(root: string): Promise<State> {
  return JSON.parse(await readFile(join(root, ".distributor.json"), "utf8"));
}

/** Path → digest of a bundle's files, as they must lie at the destination. */
const digests = (bundle: Record<string, string>) =>
  Object.fromEntries(Object.entries(bundle).map(([path, text]) => [path, sha256Of(text)]));

/**
 * The destination holds exactly `bundle` (no other file besides `.distributor.json`), and the
 * state records exactly those outputs with their digests and names `created` as its source.
 */
async function expectExactly(root: string, bundle: Record<string, string>, created: string) {
  const onDisk = await files(root);
  delete onDisk[".distributor.json"];
  const expected = digests(bundle);
  // Compared by count first: a diff of two 5 000-entry objects is unreadable.
  expect(Object.keys(onDisk).length).toBe(Object.keys(expected).length);
  expect(onDisk).toEqual(expected);
  const state = await stateOf(root);
  expect(state.source.manifest.created).toBe(created);
  expect(Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256]))).toEqual(expected);
}

function spawnCli(args: string[]): {
  done: Promise<CliResult>;
  kill: (signal: NodeJS.Signals) => void;
} {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
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
  return { done, kill: (signal) => child.kill(signal) };
}

/** `writeBundle` for thousands of files: the same manifest, the files written 200 at a time. */
async function writeLargeBundle(
  dir: string,
  id: string,
  created: string,
  files: Record<string, string>,
): Promise<void> {
  const entries = Object.entries(files);
  for (const directory of new Set(entries.map(([path]) => dirname(path)))) {
    await mkdir(join(dir, directory), { recursive: true });
  }
  for (let start = 0; start < entries.length; start += 200) {
    await Promise.all(
      entries.slice(start, start + 200).map(([path, text]) => writeFile(join(dir, path), text)),
    );
  }
  const listed = entries
    .map(([path, text]) => ({ path, sha256: sha256Of(text), size: Buffer.byteLength(text) }))
    .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const digest = sha256Of(listed.map((f) => `${f.sha256} ${f.size} ${f.path}\n`).join(""));
  const manifest = { schema_version: 1, id, created, digest, files: listed };
  await writeFile(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

describe("rollback after an interrupted replacement", () => {
  // 5 000 small files: the replacement takes seconds, long enough to stop it part-way.
  const COUNT = 5_000;
  const CHANGED = 4_400; // B rewrites files 0…4399, keeps 4400…4899, drops 4900…4999
  const KEPT = 4_900;
  const ADDED = 100; // and adds new/0…99
  const A_CREATED = "2026-06-04T09:00:00Z";
  const B_CREATED = "2026-06-04T10:00:00Z";
  const pathOf = (i: number) =>
    `d${String(Math.floor(i / 250)).padStart(2, "0")}/f${String(i).padStart(4, "0")}.txt`;
  const newPath = (i: number) => `new/n${String(i).padStart(3, "0")}.txt`;

  const bundleA: Record<string, string> = {};
  for (let i = 0; i < COUNT; i++) bundleA[pathOf(i)] = `A ${i}\n`;
  const bundleB: Record<string, string> = {};
  for (let i = 0; i < KEPT; i++) bundleB[pathOf(i)] = i < CHANGED ? `B ${i}\n` : `A ${i}\n`;
  for (let i = 0; i < ADDED; i++) bundleB[newPath(i)] = `B new ${i}\n`;
  /** The paths where B's bytes differ from what A left there (or where A has nothing). */
  const bOnly = Object.keys(bundleB).filter((path) => bundleA[path] !== bundleB[path]);

  // Both bundles are written once for the file's two cases (10 000 files take seconds).
  let bundles = "";
  beforeAll(async () => {
    bundles = await mkdtemp(join(tmpdir(), "distributor-completeness-"));
    await writeLargeBundle(join(bundles, "a"), "reports", A_CREATED, bundleA);
    await writeLargeBundle(join(bundles, "b"), "reports", B_CREATED, bundleB);
  }, 120_000);
  afterAll(async () => {
    if (bundles !== "") await rm(bundles, { recursive: true, force: true });
  });

  /** The paths of `bOnly` that hold B's bytes right now (read synchronously: one quick pass). */
  const holdingB = (dest: string) =>
    bOnly.filter((path) => {
      try {
        return readFileSync(join(dest, path), "utf8") === bundleB[path];
      } catch {
        return false;
      }
    });

  for (const signal of ["SIGKILL", "SIGINT"] as const) {
    it(`${signal} at ~30 % of B, then a plain run of A completes A exactly; B again replaces it`, async () => {
      const srcA = join(bundles, "a");
      const srcB = join(bundles, "b");
      const dest = join(tmp(), "dest");
      const configPath = join(tmp(), "distributor.yml");
      const fixed = "        path_mapping: {mode: fixed}\n";
      const pointAt = (source: string) =>
        writeFile(configPath, singlePipelineConfig(source, dest, fixed));

      await pointAt(srcA);
      const first = await runCli(["run", "--config", configPath]);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toContain(`action=publish_new status=published outputs=${COUNT}`);

      await pointAt(srcB);
      const victim = spawnCli(["run", "--config", configPath, "--format", "json"]);
      const deadline = Date.now() + 30_000;
      let seen = 0;
      for (;;) {
        seen = holdingB(dest).length;
        if (seen >= 0.3 * KEPT + 0.3 * ADDED) break;
        if (Date.now() > deadline) throw new Error(`the run wrote only ${seen} files in 30 s`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      victim.kill(signal);
      const stopped = await victim.done;
      if (signal === "SIGKILL") {
        expect(stopped.code).toBeNull();
      } else {
        // The first SIGINT stops the run cleanly: the envelope says it was interrupted.
        expect(stopped.code, stopped.stderr).toBe(1);
        const envelope = envelopeOf(stopped);
        expect(envelope.error?.code).toBe("aborted");
        expect(envelope.result?.interrupted).toBe(true);
      }
      // Stopped before its commit: the state still names A, and files A had were overwritten in
      // place with B's bytes.
      const overwritten = holdingB(dest).filter((path) => path in bundleA);
      expect((await stateOf(dest)).source.manifest.created).toBe(A_CREATED);
      expect(overwritten.length).toBeGreaterThan(0);
      expect(overwritten.length).toBeLessThan(CHANGED);

      // Back to A: recovery drops what the dead run overwrote, and the skip becomes `complete`.
      await pointAt(srcA);
      const back = await runCli(["run", "--config", configPath, "--format", "json"]);
      expect(back.code, back.stderr).toBe(0);
      const completed = actionOf(back);
      expect(completed.action).toBe("complete");
      expect(completed.status).toBe("published");
      expect(completed.reason).toContain("not recorded");
      const written = completed.outputs.map((o) => o.path);
      for (const path of written) expect(bundleA).toHaveProperty([path]);
      expect(new Set(written).size).toBe(written.length);
      for (const path of overwritten) expect(written).toContain(path);
      await expectExactly(dest, bundleA, A_CREATED);

      const audited = await runCli(["audit", "--config", configPath, "--format", "json"]);
      expect(audited.code, audited.stdout).toBe(0);
      expect(resultOf(audited)).toMatchObject({
        checked_count: COUNT,
        ok_count: COUNT,
        incomplete_count: 0,
        drift: false,
      });
      const again = await runCli(["run", "--config", configPath]);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("action=skip_same status=skipped");

      // And forward to B again: an ordinary replacement.
      await pointAt(srcB);
      const forward = await runCli(["run", "--config", configPath, "--format", "json"]);
      expect(forward.code, forward.stderr).toBe(0);
      expect(actionOf(forward)).toMatchObject({ action: "replace_older", status: "published" });
      await expectExactly(dest, bundleB, B_CREATED);
      const clean = await runCli(["audit", "--config", configPath]);
      expect(clean.code, clean.stdout + clean.stderr).toBe(0);
      expect(clean.stdout).toContain(
        `status=ok checked=${KEPT + ADDED} ok=${KEPT + ADDED} missing=0 changed=0 unmanaged=0 incomplete=0`,
      );
    }, 240_000);
  }
});

describe("HTML turned on and off", () => {
  const FILES = {
    "report.md": "# Report\n\nSunny.\n",
    "notes/guide.md": "# Guide\n\nRead me.\n",
    "data.csv": "a,b\n1,2\n",
  };
  const HTML_ON =
    "        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n";

  it("completes the HTML when it is turned on, removes it when turned off, then skips", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeBundle(source, "reports.daily", "2026-06-04T10:00:00Z", FILES);
    await writeFile(configPath, singlePipelineConfig(source, dest));
    const first = await runCli(["run", "--config", configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain("action=publish_new status=published outputs=3");
    await expectExactly(dest, FILES, "2026-06-04T10:00:00Z");

    // On: audit names the HTML the records lack; a plain run writes exactly that.
    await writeFile(configPath, singlePipelineConfig(source, dest, HTML_ON));
    const lacking = await runCli(["audit", "--config", configPath]);
    expect(lacking.code).toBe(1);
    expect(lacking.stdout).toContain(
      "Audit: pipeline=reports destination=archive bundle=. status=incomplete checked=3 ok=3 missing=0 changed=0 unmanaged=0 incomplete=2",
    );
    expect(lacking.stdout).toContain(
      "Incomplete: pipeline=reports destination=archive bundle=. path=notes/guide.html status=not_recorded",
    );
    expect(lacking.stdout).toContain(
      "Incomplete: pipeline=reports destination=archive bundle=. path=report.html status=not_recorded",
    );
    expect(lacking.stderr).toContain("plain `distributor run`");

    const on = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(on.code, on.stderr).toBe(0);
    const completed = actionOf(on);
    expect(completed).toMatchObject({ action: "complete", status: "published" });
    expect(completed.outputs.map((o) => [o.path, o.kind])).toEqual([
      ["notes/guide.html", "generated"],
      ["report.html", "generated"],
    ]);
    expect(await readFile(join(dest, "report.html"), "utf8")).toContain("Sunny.");
    expect(await readFile(join(dest, "notes/guide.html"), "utf8")).toContain("Read me.");
    const withHtml = await stateOf(dest);
    const byPath = (a: StateRecord, b: StateRecord) => (a.path < b.path ? -1 : 1);
    // Records keep their order; a completion appends the ones it adds.
    expect(withHtml.outputs.sort(byPath).map((o) => [o.path, o.kind])).toEqual([
      ["data.csv", "source"],
      ["notes/guide.html", "generated"],
      ["notes/guide.md", "source"],
      ["report.html", "generated"],
      ["report.md", "source"],
    ]);
    const onDisk = await files(dest);
    for (const record of withHtml.outputs) expect(onDisk[record.path]).toBe(record.sha256);
    const auditedOn = await runCli(["audit", "--config", configPath]);
    expect(auditedOn.code, auditedOn.stdout + auditedOn.stderr).toBe(0);
    expect(auditedOn.stdout).toContain("status=ok checked=5 ok=5");
    const skipOn = await runCli(["run", "--config", configPath]);
    expect(skipOn.stdout).toContain("action=skip_same status=skipped");

    // Off: the HTML records are no longer produced; a plain run deletes them and writes nothing.
    await writeFile(configPath, singlePipelineConfig(source, dest));
    const extra = await runCli(["audit", "--config", configPath, "--format", "json"]);
    expect(extra.code).toBe(1);
    expect(envelopeOf(extra).error?.code).toBe("drift");
    const [destination] = resultOf(extra).destinations as Array<{
      bundles: Array<{ incomplete: unknown[]; incomplete_count: number }>;
    }>;
    expect(destination?.bundles[0]?.incomplete).toEqual([
      { path: "notes/guide.html", status: "not_produced" },
      { path: "report.html", status: "not_produced" },
    ]);

    const off = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(off.code, off.stderr).toBe(0);
    expect(actionOf(off)).toMatchObject({ action: "complete", status: "published", outputs: [] });
    await expectExactly(dest, FILES, "2026-06-04T10:00:00Z");
    const skipOff = await runCli(["run", "--config", configPath]);
    expect(skipOff.code, skipOff.stderr).toBe(0);
    expect(skipOff.stdout).toContain("action=skip_same status=skipped");
    const auditedOff = await runCli(["audit", "--config", configPath]);
    expect(auditedOff.code, auditedOff.stdout + auditedOff.stderr).toBe(0);
  }, 60_000);
});

describe("a record removed from the state", () => {
  const FILES = {
    "report.md": "# Report\n",
    "data/summary.txt": "Summary of the day\n",
    "data/table.csv": "a,b\n1,2\n",
  };

  it("is named by audit and written back by a plain run (complete, not skip_same)", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeBundle(source, "reports.daily", "2026-06-04T10:00:00Z", FILES);
    await writeFile(configPath, singlePipelineConfig(source, dest));
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);

    const statePath = join(dest, ".distributor.json");
    const state = await stateOf(dest);
    state.outputs = state.outputs.filter((o) => o.path !== "data/summary.txt");
    await writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`);
    await rm(join(dest, "data/summary.txt"));

    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code).toBe(1);
    expect(audited.stdout).toBe(
      "Audit: pipeline=reports destination=archive bundle=. status=incomplete checked=2 ok=2 missing=0 changed=0 unmanaged=0 incomplete=1\n" +
        "Incomplete: pipeline=reports destination=archive bundle=. path=data/summary.txt status=not_recorded\n",
    );
    expect(audited.stderr).toContain("a plain `distributor run`");
    const json = await runCli(["audit", "--config", configPath, "--format", "json"]);
    expect(json.code).toBe(1);
    expect(envelopeOf(json).error?.code).toBe("drift");
    expect(resultOf(json)).toMatchObject({ incomplete_count: 1, drift: true });

    const run = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(run.code, run.stderr).toBe(0);
    const completed = actionOf(run);
    expect(completed).toMatchObject({ action: "complete", status: "published" });
    expect(completed.outputs.map((o) => o.path)).toEqual(["data/summary.txt"]);
    await expectExactly(dest, FILES, "2026-06-04T10:00:00Z");
    const clean = await runCli(["audit", "--config", configPath]);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    const again = await runCli(["run", "--config", configPath]);
    expect(again.stdout).toContain("action=skip_same status=skipped");
  });
});

describe("prune beside the publication in force", () => {
  const keepNone =
    "        path_mapping: {mode: fixed}\n        retention: {prune: {enabled: true, keep_latest: 0, older_than: 1h}}\n";

  /** Dates every record of the state a year back, past any `older_than`. */
  async function age(dest: string) {
    const state = await stateOf(dest);
    for (const output of state.outputs) output.updated_at = "2025-06-01T00:00:00Z";
    await writeFile(join(dest, ".distributor.json"), `${JSON.stringify(state, null, 2)}\n`);
  }

  it("deletes nothing of the live publication on a fixed + replace destination", async () => {
    const files_ = { "report.md": "# Report\n", "summary.txt": "Summary\n" };
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeBundle(source, "reports.daily", "2025-06-01T00:00:00Z", files_);
    await writeFile(configPath, singlePipelineConfig(source, dest, keepNone));
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await age(dest);
    const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "archive"];

    const dry = await runCli(["prune", ...selector, "--dry-run", "--format", "json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(resultOf(dry).planned_outputs).toEqual([]);
    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain("planned=0 deleted=0");
    await expectExactly(dest, files_, "2025-06-01T00:00:00Z");
    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code, audited.stdout + audited.stderr).toBe(0);
    const run = await runCli(["run", "--config", configPath]);
    expect(run.stdout).toContain("action=skip_same status=skipped");
  });

  it("deletes only the older bundle's leftovers on a merge destination", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(
      configPath,
      singlePipelineConfig(source, dest, `${keepNone}        reconciliation: {mode: merge}\n`),
    );
    const older = { "a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n" };
    const newer = { "a.txt": "a2\n", "c.txt": "c1\n", "d.txt": "d2\n" };
    await writeBundle(source, "reports.daily", "2025-06-01T00:00:00Z", older);
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await writeBundle(source, "reports.daily", "2025-06-02T00:00:00Z", newer);
    const merged = await runCli(["run", "--config", configPath]);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toContain("action=replace_older status=published");
    expect((await stateOf(dest)).outputs.map((o) => o.path)).toEqual([
      "a.txt",
      "b.txt",
      "c.txt",
      "d.txt",
    ]);
    await age(dest);
    const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "archive"];

    const dry = await runCli(["prune", ...selector, "--dry-run", "--format", "json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect((resultOf(dry).planned_outputs as Array<{ path: string }>).map((o) => o.path)).toEqual([
      "b.txt",
    ]);
    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain("planned=1 deleted=1");
    await expectExactly(dest, newer, "2025-06-02T00:00:00Z");
    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code, audited.stdout + audited.stderr).toBe(0);
    const again = await runCli(["prune", ...selector, "--apply"]);
    expect(again.stdout).toContain("planned=0 deleted=0");
  });
});
