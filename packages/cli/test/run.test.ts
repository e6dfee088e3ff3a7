import { spawn } from "node:child_process";
import { once } from "node:events";
import { readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import {
  BIN,
  envelopeOf,
  REPORT,
  resultOf,
  runCli,
  useTempDir,
  writeBundle,
  writeConfig,
  writeFiles,
  writeSpecBundle,
} from "./helpers.js";

const tmp = useTempDir();

/** Every file below `root` with its bytes, for byte-for-byte comparisons. */
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

async function state(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(path, ".distributor.json"), "utf8"));
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Writes a bundle with `manifest create` through the CLI itself. */
async function bundle(dir: string, id: string, created: string, files: Record<string, string>) {
  await writeFiles(dir, files);
  const made = await runCli([
    "manifest",
    "create",
    "--id",
    id,
    "--created",
    created,
    "--force",
    dir,
  ]);
  expect(made.code, made.stderr).toBe(0);
}

async function config(text: string): Promise<string> {
  const path = join(tmp(), "distributor.yml");
  await writeFile(path, text);
  return path;
}

function localPipeline(id: string, source: string, destinations: string): string {
  return `  - id: ${id}\n    source: {backend: local, path: ${source}}\n    destinations:\n${destinations}`;
}

describe("distributor run", () => {
  it("publishes a new bundle, then skips it on the next run", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeSpecBundle(source);
    const configPath = await writeConfig(tmp(), source, dest);

    const first = await runCli(["run", "--config", configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe(
      "pipeline=reports destination=archive bundle=. source=reports.example.2026-06-04 action=publish_new status=published outputs=1 primary_url=-\n",
    );
    expect(await readFile(join(dest, "report.md"), "utf8")).toBe(REPORT);
    const written = await state(dest);
    expect(written.schema_version).toBe(2);
    expect(written.pipeline_id).toBe("reports");

    const second = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(second.code).toBe(0);
    const result = resultOf(second) as { dry_run: boolean; actions: Record<string, unknown>[] };
    expect(result.dry_run).toBe(false);
    expect(result.actions).toHaveLength(1);
    expect(result.actions[0]).toMatchObject({
      pipeline_id: "reports",
      destination_id: "archive",
      bundle_path: ".",
      source_id: "reports.example.2026-06-04",
      action: "skip_same",
      status: "skipped",
    });
  });

  it("replace_older deletes outputs the new bundle no longer has; merge keeps them", async () => {
    for (const mode of ["replace", "merge"] as const) {
      const source = join(tmp(), mode, "src");
      const dest = join(tmp(), mode, "dest");
      await bundle(source, "daily", "2026-06-01T00:00:00Z", {
        "report.md": "old\n",
        "summary.txt": "sum\n",
      });
      const configPath = await config(
        `pipelines:\n${localPipeline("reports", source, `      - id: archive\n        backend: local\n        path: ${dest}\n        reconciliation: {mode: ${mode}}\n`)}`,
      );
      expect((await runCli(["run", "--config", configPath])).code).toBe(0);
      await rm(join(source, "summary.txt"));
      await bundle(source, "daily", "2026-06-02T00:00:00Z", { "report.md": "new\n" });

      const result = await runCli(["run", "--config", configPath]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain("action=replace_older status=published");
      expect(await readFile(join(dest, "report.md"), "utf8")).toBe("new\n");
      const outputs = ((await state(dest)).outputs as { path: string }[]).map((o) => o.path).sort();
      if (mode === "replace") {
        expect(await exists(join(dest, "summary.txt"))).toBe(false);
        expect(outputs).toEqual(["report.md"]);
      } else {
        expect(await readFile(join(dest, "summary.txt"), "utf8")).toBe("sum\n");
        expect(outputs).toEqual(["report.md", "summary.txt"]);
      }
    }
  });

  it("publishes two pipelines into one shared root, and refuses another owner's path", async () => {
    const first = join(tmp(), "first");
    const second = join(tmp(), "second");
    const third = join(tmp(), "third");
    const dest = join(tmp(), "shared");
    await bundle(first, "reports.first", "2026-06-01T00:00:00Z", { "first.md": "# First\n" });
    await bundle(second, "reports.second", "2026-06-01T00:00:00Z", { "second.md": "# Second\n" });
    await bundle(third, "reports.third", "2026-06-01T00:00:00Z", { "first.md": "# Mine\n" });
    const shared = `      - id: archive\n        backend: local\n        path: ${dest}\n        state: {mode: shared_root}\n`;
    const configPath = await config(
      `pipelines:\n${localPipeline("reports-first", first, shared)}${localPipeline("reports-second", second, shared)}${localPipeline("reports-third", third, shared)}`,
    );

    const both = await runCli([
      "run",
      "--config",
      configPath,
      "--pipeline",
      "reports-first",
      "--pipeline",
      "reports-second",
    ]);
    expect(both.code, both.stderr).toBe(0);
    expect(await readFile(join(dest, "first.md"), "utf8")).toBe("# First\n");
    expect(await readFile(join(dest, "second.md"), "utf8")).toBe("# Second\n");
    const written = await state(dest);
    expect(written.schema_version).toBe(3);
    expect((written.owners as { pipeline_id: string }[]).map((o) => o.pipeline_id)).toEqual([
      "reports-first",
      "reports-second",
    ]);

    const before = await tree(dest);
    const conflict = await runCli([
      "run",
      "--config",
      configPath,
      "--pipeline",
      "reports-third",
      "--format",
      "json",
    ]);
    expect(conflict.code).toBe(1);
    const envelope = envelopeOf(conflict);
    expect(envelope.ok).toBe(false);
    const action = (envelope.result as { actions: Record<string, unknown>[] }).actions[0];
    expect(action).toMatchObject({ action: "fail_conflict", status: "failed" });
    expect(action?.error).toEqual({
      code: "conflict",
      message: expect.stringContaining(
        "destination output path first.md is owned by reports-first/archive",
      ),
    });
    expect(await tree(dest)).toEqual(before);
  });

  it("refuses unmanaged content and writes nothing; --force replaces only inside the bundle path", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeSpecBundle(join(source, "bundle"));
    await writeFiles(dest, {
      "bundle/unmanaged.txt": "mine\n",
      "bundle-sibling/keep.txt": "keep\n",
    });
    const configPath = await writeConfig(tmp(), source, dest);

    const refused = await runCli(["run", "--config", configPath]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain(
      "bundle=bundle source=reports.example.2026-06-04 action=fail_unmanaged status=failed",
    );
    expect(refused.stderr).toContain(
      "fail_unmanaged: destination has content but no distributor state",
    );
    expect(await tree(dest)).toEqual({
      "bundle/unmanaged.txt": "mine\n",
      "bundle-sibling/keep.txt": "keep\n",
    });

    const forced = await runCli(["run", "--config", configPath, "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain("action=force_replace status=published");
    expect(await exists(join(dest, "bundle/unmanaged.txt"))).toBe(false);
    expect(await readFile(join(dest, "bundle/report.md"), "utf8")).toBe(REPORT);
    expect(await readFile(join(dest, "bundle-sibling/keep.txt"), "utf8")).toBe("keep\n");
  });

  it("prints what an interrupted action planned as planned=, never as outputs= it did not write", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const files = Object.fromEntries(
      Array.from({ length: 400 }, (_, i) => [
        `data/${String(i).padStart(3, "0")}.txt`,
        `${i} ${"x".repeat(16_000)}\n`,
      ]),
    );
    await writeBundle(source, "reports.many", "2026-06-04T10:00:00Z", files);
    const configPath = await writeConfig(tmp(), source, dest);

    const child = spawn(process.execPath, [BIN, "run", "--config", configPath], {
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.resume();
    const closed = once(child, "close");
    // Interrupt it once it has visibly started writing, well before it has written everything.
    const deadline = Date.now() + 20_000;
    while ((await readdir(join(dest, "data")).catch(() => [])).length <= 10) {
      if (Date.now() > deadline) throw new Error("the run never started writing");
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    child.kill("SIGTERM");
    const [code] = await closed;

    expect(code).toBe(1);
    expect(stdout).toBe(
      "pipeline=reports destination=archive bundle=. source=reports.many action=publish_new status=failed planned=400 primary_url=-\n",
    );
  });

  it("replaces a schema 1 destination and rewrites its state as schema 2", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeSpecBundle(source);
    const v1 = {
      schema_version: 1,
      pipeline_id: "reports",
      destination_id: "archive",
      published_at: "2026-06-01T10:00:00Z",
      source: {
        manifest: {
          schema_version: 1,
          id: "reports.example.2026-06-04",
          created: "2026-06-01T09:00:00Z",
          digest: "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
          files: [
            {
              path: "report.md",
              sha256: "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6",
              size: 16,
            },
          ],
        },
      },
      outputs: [
        {
          path: "report.md",
          kind: "source",
          source_path: "report.md",
          sha256: "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6",
          size: 16,
        },
      ],
    };
    await writeFiles(dest, {
      ".distributor.json": `${JSON.stringify(v1, null, 2)}\n`,
      "report.md": REPORT,
    });
    const configPath = await writeConfig(tmp(), source, dest);
    const result = await runCli(["run", "--config", configPath]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("action=replace_older status=published");
    const written = await state(dest);
    expect(written.schema_version).toBe(2);
    expect(written.created_at).toBe("2026-06-01T10:00:00Z");
    expect(written.reconciliation).toEqual({ mode: "replace" });
    expect(written.state).toEqual({ mode: "single_owner" });
  });

  it("fans out: one failing destination does not stop the other (exit 1)", async () => {
    const source = join(tmp(), "src");
    const bad = join(tmp(), "bad");
    const good = join(tmp(), "good");
    await writeSpecBundle(source);
    await writeFiles(bad, { "stray.txt": "not managed\n" });
    const configPath = await config(
      `pipelines:\n${localPipeline("reports", source, `      - id: bad\n        backend: local\n        path: ${bad}\n      - id: good\n        backend: local\n        path: ${good}\n`)}`,
    );
    const result = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.ok).toBe(false);
    expect(envelope.error?.code).toBeTruthy();
    const actions = (envelope.result as { actions: { destination_id: string; status: string }[] })
      .actions;
    expect(actions.map((a) => `${a.destination_id}:${a.status}`)).toEqual([
      "bad:failed",
      "good:published",
    ]);
    expect(await readFile(join(good, "report.md"), "utf8")).toBe(REPORT);
    expect(await tree(bad)).toEqual({ "stray.txt": "not managed\n" });
  });

  it("--dry-run leaves the destination byte-for-byte unchanged", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "daily", "2026-06-01T00:00:00Z", {
      "report.md": "old\n",
      "gone.txt": "x\n",
    });
    const configPath = await writeConfig(tmp(), source, dest);
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await rm(join(source, "gone.txt"));
    await bundle(source, "daily", "2026-06-02T00:00:00Z", { "report.md": "new\n" });
    const before = await tree(dest);

    const dry = await runCli(["run", "--config", configPath, "--dry-run", "--format", "json"]);
    expect(dry.code, dry.stderr).toBe(0);
    const result = resultOf(dry) as {
      dry_run: boolean;
      actions: { action: string; status: string }[];
    };
    expect(result.dry_run).toBe(true);
    expect(result.actions[0]).toMatchObject({ action: "replace_older", status: "planned" });
    expect(await tree(dest)).toEqual(before);

    const fresh = join(tmp(), "fresh");
    const freshConfig = join(tmp(), "fresh.yml");
    await writeFile(freshConfig, (await readFile(configPath, "utf8")).replace(dest, fresh));
    const planned = await runCli(["run", "--config", freshConfig, "--dry-run"]);
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain("action=publish_new status=planned");
    expect(await exists(fresh)).toBe(false);
  });

  it("renders HTML sidecar and index outputs with URLs and a primary URL in state", async () => {
    const source = join(tmp(), "src");
    await bundle(source, "site", "2026-06-01T00:00:00Z", {
      "index.md": "# Home <script>x</script>\n\n| a |\n| - |\n| 1 |\n",
      "guide/intro.md": "Intro text\n",
    });
    const sidecar = join(tmp(), "sidecar");
    const index = join(tmp(), "index");
    const destinations = (path: string, mode: string, id: string) =>
      `      - id: ${id}\n        backend: local\n        path: ${path}\n        publish: {source: false, html: true}\n        transform: {markdown_to_html: {enabled: true, mode: ${mode}}}\n        links: {base_url: "https://example.com/docs", primary: html}\n`;
    const configPath = await config(
      `pipelines:\n${localPipeline("docs", source, destinations(sidecar, "sidecar", "sidecar") + destinations(index, "index", "index"))}`,
    );
    const result = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(result.code, result.stderr).toBe(0);

    const html = await readFile(join(sidecar, "index.html"), "utf8");
    expect(html).toContain("<title>Home x</title>");
    expect(html).toContain("<table>");
    expect(html).not.toContain("<script>");
    expect(await readFile(join(sidecar, "guide/intro.html"), "utf8")).toContain(
      "<title>intro</title>",
    );
    expect(await readFile(join(index, "guide/index.html"), "utf8")).toContain("<p>Intro text</p>");

    const sidecarState = await state(sidecar);
    expect((sidecarState.links as { primary_url: string }).primary_url).toBe(
      "https://example.com/docs/",
    );
    const outputs = sidecarState.outputs as Record<string, unknown>[];
    expect(outputs.find((o) => o.path === "guide/intro.html")).toMatchObject({
      kind: "generated",
      source_path: "guide/intro.md",
      transform: "markdown_to_html",
      url: "https://example.com/docs/guide/intro.html",
    });
    const indexState = await state(index);
    expect(
      (indexState.outputs as { path: string; url: string }[])
        .map((o) => `${o.path} ${o.url}`)
        .sort(),
    ).toEqual([
      "guide/index.html https://example.com/docs/guide/",
      "index.html https://example.com/docs/",
    ]);
    const actions = (
      resultOf(result) as { actions: { destination_id: string; primary_url?: string }[] }
    ).actions;
    expect(actions.map((a) => `${a.destination_id} ${a.primary_url}`)).toEqual([
      "sidecar https://example.com/docs/",
      "index https://example.com/docs/",
    ]);
  });

  it("fails with exit 1 and a pipeline error when a bundle is invalid, writing nothing", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeSpecBundle(source);
    await writeFile(join(source, "report.md"), "# Report\nRainy.\n");
    const configPath = await writeConfig(tmp(), source, dest);
    const result = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("bundle_invalid");
    expect(envelope.error?.message).toContain("report.md");
    expect(await exists(dest)).toBe(false);
  });
});
