import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildManifest, fileDigest, parseTimestamp, serializeManifest } from "@distributor/bundle";
import { createMemoryBackend, isStorageError } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { WorkflowError } from "../../src/errors.js";
import {
  type ValidateEvent,
  validateBundlePath,
  validateConfiguredSource,
} from "../../src/validate/validate.js";
import { writeFiles } from "../support/helpers.js";
import { type BackendCall, wrappingDestination } from "../support/registries.js";

const REPORT = "# Report\nSunny.\n";
const REPORT_SHA = "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6";
const EXAMPLE_BUNDLE_DIGEST =
  "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-validate-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes the files and a manifest listing them. */
async function writeBundle(
  directory: string,
  files: Record<string, string>,
  id = "reports.example.2026-06-04",
  created = "2026-06-04T11:55:00Z",
): Promise<void> {
  await writeFiles(directory, files);
  const parsed = parseTimestamp(created);
  if (!parsed.ok) throw new Error(parsed.problem);
  const manifest = buildManifest({
    id,
    created: parsed.date,
    files: Object.entries(files).map(([path, content]) => ({ path, ...fileDigest(content) })),
  });
  await writeFile(join(directory, "manifest.json"), serializeManifest(manifest));
}

describe("validateBundlePath", () => {
  it("reports a valid bundle with its manifest identity", async () => {
    await writeBundle(root, { "report.md": REPORT });

    const report = await validateBundlePath({ path: root });

    expect(report).toEqual({
      ok: true,
      location: `local:${root}`,
      issues: [],
      bundles: [
        {
          path: ".",
          ok: true,
          id: "reports.example.2026-06-04",
          digest: EXAMPLE_BUNDLE_DIGEST,
          created: "2026-06-04T11:55:00Z",
          files: 1,
          total_size: 16,
          unlisted_files: [],
          issues: [],
          warnings: [],
        },
      ],
    });
  });

  it("names the tampered file and both digests", async () => {
    await writeBundle(root, { "report.md": REPORT });
    await writeFile(join(root, "report.md"), "# Report\nRainy.\n");

    const report = await validateBundlePath({ path: root });

    expect(report.ok).toBe(false);
    const [bundle] = report.bundles;
    expect(bundle?.ok).toBe(false);
    expect(bundle?.id).toBe("reports.example.2026-06-04");
    expect(bundle?.issues).toHaveLength(1);
    const issue = bundle?.issues[0];
    expect(issue?.code).toBe("sha256_mismatch");
    expect(issue?.path).toBe("report.md");
    expect(issue?.expected).toBe(REPORT_SHA);
    expect(issue?.actual).toBe(fileDigest("# Report\nRainy.\n").sha256);
    expect(issue?.message).toContain("report.md");
    expect(issue?.message).toContain(REPORT_SHA);
    expect(issue?.message).toContain(fileDigest("# Report\nRainy.\n").sha256);
  });

  it("validates every bundle of a tree in path order", async () => {
    await writeBundle(join(root, "b"), { "notes.txt": "b\n" }, "bundle-b");
    await writeBundle(join(root, "a", "x"), { "notes.txt": "a\n" }, "bundle-a");
    await writeFile(join(root, "a", "x", "stray.txt"), "not listed");

    const report = await validateBundlePath({ path: root });

    expect(report.ok).toBe(false);
    expect(report.bundles.map((bundle) => [bundle.path, bundle.id, bundle.ok])).toEqual([
      ["a/x", "bundle-a", false],
      ["b", "bundle-b", true],
    ]);
    expect(report.bundles[0]?.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unlisted_file", "stray.txt"],
    ]);
  });

  it("fails when no bundle is found", async () => {
    await writeFiles(root, { "loose.txt": "x" });

    const report = await validateBundlePath({ path: root });

    expect(report.ok).toBe(false);
    expect(report.bundles).toEqual([]);
    expect(report.issues.map((issue) => issue.code)).toEqual(["no_bundles"]);
  });

  it("reports nested bundles as problems of the tree", async () => {
    await writeBundle(join(root, "outer"), { "a.txt": "a" }, "outer");
    await writeBundle(join(root, "outer", "inner"), { "b.txt": "b" }, "inner");

    const report = await validateBundlePath({ path: root });

    expect(report.ok).toBe(false);
    expect(report.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["nested_bundle", "outer/inner"],
    ]);
  });

  it("reports an unusable manifest without identity", async () => {
    await writeFiles(root, { "manifest.json": '{"schema_version": 2}', "report.md": REPORT });

    const report = await validateBundlePath({ path: root });

    const [bundle] = report.bundles;
    expect(bundle).toMatchObject({ path: ".", ok: false, id: null, digest: null, files: null });
    expect(bundle?.issues.map((issue) => issue.code)).toEqual(["invalid_manifest"]);
  });

  it("emits progress events per bundle and file", async () => {
    await writeBundle(root, { "report.md": REPORT, "b.txt": "b" });
    const events: ValidateEvent[] = [];

    await validateBundlePath({ path: root, onEvent: (event) => events.push(event) });

    expect(events[0]).toEqual({ type: "bundle_started", bundle_path: "" });
    expect(events.filter((event) => event.type === "file_checked")).toHaveLength(2);
    expect(events.at(-1)).toEqual({ type: "bundle_checked", bundle_path: "", ok: true });
  });

  it("refuses a path that is not a directory", async () => {
    await writeFiles(root, { "file.txt": "x" });

    await expect(validateBundlePath({ path: join(root, "missing") })).rejects.toMatchObject({
      name: "WorkflowError",
      code: "not_found",
    });
    await expect(validateBundlePath({ path: join(root, "file.txt") })).rejects.toMatchObject({
      code: "not_a_directory",
      message: `${join(root, "file.txt")} is not a directory`,
    });
  });

  it("stops when aborted", async () => {
    await writeBundle(root, { "report.md": REPORT });
    const controller = new AbortController();
    controller.abort(new Error("stop"));

    await expect(validateBundlePath({ path: root, signal: controller.signal })).rejects.toThrow();
  });
});

describe("validateConfiguredSource", () => {
  function config(yamlSource: string, validation = "") {
    return parseConfig(
      `pipelines:
  - id: reports
    source:
${yamlSource}
${validation}
    destinations:
      - id: archive
        backend: local
        path: ${join(root, "out")}
`,
      { cwd: root },
    );
  }
  const localSource = () => `      backend: local\n      path: ${join(root, "spool")}`;

  it("reads each bundle's manifest once (a million files' manifest is hundreds of MiB)", async () => {
    await writeBundle(join(root, "spool", "one"), { "report.md": REPORT }, "one");
    const reads: string[] = [];
    const backends = wrappingDestination(join(root, "spool"), (name, call) =>
      name.startsWith("read") || name.startsWith("open")
        ? (((path: string, ...rest: never[]) => {
            if (typeof path === "string" && path.endsWith("manifest.json")) reads.push(name);
            return (call as (...args: unknown[]) => Promise<unknown>)(path, ...rest);
          }) as BackendCall)
        : call,
    );
    const report = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
      backends,
    });
    expect(report.ok).toBe(true);
    expect(reads).toHaveLength(1);
  });

  it("validates every bundle of the pipeline's source", async () => {
    await writeBundle(join(root, "spool", "one"), { "report.md": REPORT }, "one");
    await writeBundle(join(root, "spool", "two"), { "report.md": REPORT }, "two");

    const report = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
    });

    expect(report.ok).toBe(true);
    expect(report.pipeline_id).toBe("reports");
    expect(report.location).toBe(`local:${join(root, "spool")}`);
    expect(report.bundles.map((bundle) => bundle.id)).toEqual(["one", "two"]);
  });

  it("validates only the selected bundle", async () => {
    await writeBundle(join(root, "spool", "one"), { "report.md": REPORT }, "one");
    await writeFiles(join(root, "spool", "two"), { "manifest.json": "{}" });

    const report = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
      bundlePath: "one/",
    });

    expect(report.ok).toBe(true);
    expect(report.bundles.map((bundle) => bundle.path)).toEqual(["one"]);
  });

  it("reports a selected path without a manifest", async () => {
    await mkdir(join(root, "spool", "none"), { recursive: true });

    const report = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
      bundlePath: "none",
    });

    expect(report.ok).toBe(false);
    expect(report.bundles[0]?.issues.map((issue) => issue.code)).toEqual(["missing_manifest"]);
  });

  it("applies the pipeline's validation policy", async () => {
    await writeBundle(join(root, "spool"), { "report.md": REPORT });
    await writeFile(join(root, "spool", "extra.txt"), "tolerated");

    const strict = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
    });
    const tolerant = await validateConfiguredSource({
      config: config(localSource(), "    validation:\n      unlisted_files: ignore"),
      pipelineId: "reports",
    });

    expect(strict.ok).toBe(false);
    expect(tolerant.ok).toBe(true);
    expect(tolerant.bundles[0]?.unlisted_files).toEqual(["extra.txt"]);
  });

  it("opens the source through the caller's backend registry", async () => {
    const memory = createMemoryBackend();
    await memory.writeFile("report.md", REPORT);
    const manifest = buildManifest({
      id: "from-memory",
      created: new Date("2026-06-04T11:55:00Z"),
      files: [{ path: "report.md", ...fileDigest(REPORT) }],
    });
    await memory.writeFile("manifest.json", serializeManifest(manifest));
    const opened: string[] = [];

    const report = await validateConfiguredSource({
      config: config(localSource()),
      pipelineId: "reports",
      backends: {
        local: async (location, options) => {
          opened.push(`${options.role}:${location.path}`);
          return memory;
        },
      },
    });

    expect(opened).toEqual([`source:${join(root, "spool")}`]);
    expect(report.bundles.map((bundle) => bundle.id)).toEqual(["from-memory"]);
  });

  it("fails for an unknown pipeline", async () => {
    await expect(
      validateConfiguredSource({ config: config(localSource()), pipelineId: "nope" }),
    ).rejects.toThrow(new WorkflowError("pipeline_not_found", 'pipeline "nope" not found'));
  });

  it("refuses an http_upload source", async () => {
    const upload = parseConfig(
      `upload_tokens:
  - id: t
    token_env: TOKEN
    allow_pipelines: [reports]
pipelines:
  - id: reports
    source:
      backend: http_upload
    destinations:
      - id: archive
        backend: local
        path: ${join(root, "out")}
`,
      { cwd: root },
    );

    await expect(
      validateConfiguredSource({ config: upload, pipelineId: "reports" }),
    ).rejects.toMatchObject({
      code: "unsupported_source",
    });
  });

  it("fails for a backend nobody registered", async () => {
    const s3 = config("      backend: s3\n      bucket: reports-bucket");

    const failure = await validateConfiguredSource({ config: s3, pipelineId: "reports" }).catch(
      (error: unknown) => error,
    );

    expect(isStorageError(failure, "unsupported")).toBe(true);
    expect((failure as Error).message).toContain("no s3 backend is registered (available: local)");
  });

  it("refuses a bundle path that leaves the source root", async () => {
    await expect(
      validateConfiguredSource({
        config: config(localSource()),
        pipelineId: "reports",
        bundlePath: "../x",
      }),
    ).rejects.toMatchObject({ code: "invalid_bundle_path" });
  });
});
