import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildManifest, fileDigest, serializeManifest } from "@distributor/bundle";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import {
  inspectBundlePath,
  inspectConfiguredDestination,
  inspectConfiguredSource,
  inspectPath,
  inspectStatePath,
} from "../../src/inspect/inspect.js";
import { writeFiles } from "../support/helpers.js";

const REPORT = "# Report\nSunny.\n";
const SUMMARY = "Summary\nCloudy.\n";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-inspect-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function manifestFor(files: Record<string, string>, id = "reports.example.2026-05-30") {
  return buildManifest({
    id,
    created: new Date("2026-05-30T11:00:00Z"),
    files: Object.entries(files).map(([path, content]) => ({ path, ...fileDigest(content) })),
  });
}

async function writeBundle(directory: string, files: Record<string, string>, id?: string) {
  await writeFiles(directory, files);
  await writeFile(join(directory, "manifest.json"), serializeManifest(manifestFor(files, id)));
}

const embeddedManifest = JSON.parse(
  serializeManifest(manifestFor({ "report.md": REPORT, "summary.txt": SUMMARY })),
) as unknown;
const reportDigest = fileDigest(REPORT);
const summaryDigest = fileDigest(SUMMARY);

const v1State = {
  schema_version: 1,
  distributor_version: "0.9.0",
  pipeline_id: "reports",
  destination_id: "archive",
  published_at: "2026-05-30T11:12:00Z",
  source: { manifest: embeddedManifest },
  outputs: [
    { path: "report.md", kind: "source", source_path: "report.md", ...reportDigest },
    { path: "summary.txt", kind: "source", source_path: "summary.txt", ...summaryDigest },
  ],
};

const v2State = {
  schema_version: 2,
  pipeline_id: "reports",
  destination_id: "archive",
  published_at: "2026-05-30T11:12:00Z",
  created_at: "2026-05-29T08:00:00Z",
  updated_at: "2026-05-30T11:12:00Z",
  state: { mode: "single_owner" },
  reconciliation: { mode: "merge" },
  source: { manifest: embeddedManifest },
  links: { primary_url: "https://reports.example.com/archive/report.md" },
  outputs: [
    {
      path: "report.md",
      kind: "source",
      source_path: "report.md",
      url: "https://reports.example.com/archive/report.md",
      ...reportDigest,
      created_at: "2026-05-29T08:00:00Z",
      updated_at: "2026-05-30T11:12:00Z",
    },
  ],
};

const sourceIdentity = {
  source_id: "reports.example.2026-05-30",
  source_digest: (embeddedManifest as { digest: string }).digest,
  source_created: "2026-05-30T11:00:00Z",
};

const v3State = {
  schema_version: 3,
  created_at: "2026-05-30T11:12:00Z",
  updated_at: "2026-05-30T12:10:00Z",
  state: { mode: "shared_root" },
  owners: [
    {
      pipeline_id: "reports",
      destination_id: "archive",
      reconciliation: { mode: "replace" },
      source: { manifest: embeddedManifest },
    },
    {
      pipeline_id: "reports",
      destination_id: "html",
      reconciliation: { mode: "merge" },
      source: { manifest: embeddedManifest },
    },
  ],
  outputs: [
    {
      path: "report.md",
      kind: "source",
      source_path: "report.md",
      ...reportDigest,
      pipeline_id: "reports",
      destination_id: "archive",
      ...sourceIdentity,
      created_at: "2026-05-30T11:12:00Z",
      updated_at: "2026-05-30T11:12:00Z",
    },
    {
      path: "report.html",
      kind: "generated",
      source_path: "report.md",
      transform: "markdown_to_html",
      sha256: `sha256:${"a".repeat(64)}`,
      size: 128,
      pipeline_id: "reports",
      destination_id: "html",
      ...sourceIdentity,
      created_at: "2026-05-30T11:12:00Z",
      updated_at: "2026-05-30T12:10:00Z",
    },
  ],
};

async function writeState(directory: string, state: unknown): Promise<void> {
  await mkdir(directory, { recursive: true });
  await writeFile(join(directory, ".distributor.json"), `${JSON.stringify(state, null, 2)}\n`);
}

describe("inspectPath on bundles", () => {
  it("lists the manifest and every file as checked", async () => {
    await writeBundle(root, { "report.md": REPORT, "summary.txt": SUMMARY });

    const report = await inspectPath({ path: root });

    expect(report).toEqual({
      kind: "bundles",
      ok: true,
      location: `local:${root}`,
      issues: [],
      bundles: [
        {
          path: ".",
          ok: true,
          manifest: {
            schema_version: 1,
            id: "reports.example.2026-05-30",
            created: "2026-05-30T11:00:00Z",
            digest: (embeddedManifest as { digest: string }).digest,
          },
          files: [
            { path: "report.md", ...reportDigest, status: "ok" },
            { path: "summary.txt", ...summaryDigest, status: "ok" },
          ],
          total_size: 32,
          unlisted_files: [],
          issues: [],
        },
      ],
    });
  });

  it("shows what differs from the manifest, file by file", async () => {
    await writeBundle(root, { "a.txt": "aaaa", "b.txt": "bbbb", "c.txt": "cccc", "d.txt": "dddd" });
    await writeFile(join(root, "a.txt"), "AAAA");
    await writeFile(join(root, "b.txt"), "bbbbbb");
    await rm(join(root, "c.txt"));
    await writeFile(join(root, "extra.txt"), "extra");

    const report = await inspectPath({ path: root });

    expect(report.kind).toBe("bundles");
    if (report.kind !== "bundles") return;
    const [bundle] = report.bundles;
    expect(report.ok).toBe(false);
    expect(bundle?.files.map((file) => [file.path, file.status])).toEqual([
      ["a.txt", "sha256_mismatch"],
      ["b.txt", "size_mismatch"],
      ["c.txt", "missing_file"],
      ["d.txt", "ok"],
    ]);
    expect(bundle?.files[0]?.actual_sha256).toBe(fileDigest("AAAA").sha256);
    expect(bundle?.files[1]?.actual_size).toBe(6);
    expect(bundle?.unlisted_files).toEqual(["extra.txt"]);
  });

  it("reports an unlisted symlink and still checks every listed file", async () => {
    await writeBundle(root, { "report.md": REPORT });
    await symlink(join(root, "report.md"), join(root, "link.md"));

    const report = await inspectPath({ path: root });

    if (report.kind !== "bundles") throw new Error("expected bundles");
    expect(report.bundles[0]?.files.map((file) => file.status)).toEqual(["ok"]);
    expect(report.bundles[0]?.issues.map((issue) => issue.path)).toEqual(["link.md"]);
    expect(report.bundles[0]?.ok).toBe(false);
  });

  it("reports a listed symlink as the file's problem", async () => {
    await writeBundle(root, { "report.md": REPORT });
    await rm(join(root, "report.md"));
    await writeFile(join(root, "elsewhere.md"), REPORT);
    await symlink(join(root, "elsewhere.md"), join(root, "report.md"));

    const report = await inspectBundlePath({ path: root });

    const file = report.bundles[0]?.files[0];
    expect(file?.path).toBe("report.md");
    expect(file?.status).toBe("unsupported_entry");
  });

  it("inspects the bundle of a manifest.json path", async () => {
    await writeBundle(join(root, "bundle"), { "report.md": REPORT });

    const report = await inspectPath({ path: join(root, "bundle", "manifest.json") });

    expect(report).toMatchObject({
      kind: "bundles",
      ok: true,
      location: `local:${join(root, "bundle")}`,
    });
  });

  it("reports a missing manifest when a manifest.json path's bundle is gone", async () => {
    await writeFiles(root, { "manifest.json": "not json" });

    const report = await inspectPath({ path: join(root, "manifest.json") });

    if (report.kind !== "bundles") throw new Error("expected bundles");
    expect(report.bundles[0]).toMatchObject({ ok: false, manifest: null, files: [] });
    expect(report.bundles[0]?.issues[0]?.code).toBe("invalid_manifest");
  });

  it("fails when the path holds neither bundles nor state", async () => {
    await writeFiles(root, { "loose.txt": "x" });

    await expect(inspectPath({ path: root })).rejects.toMatchObject({
      code: "nothing_to_inspect",
      message: `${root} holds no bundle (manifest.json) and no destination state (.distributor.json)`,
    });
    await expect(inspectPath({ path: join(root, "loose.txt") })).rejects.toMatchObject({
      code: "not_a_directory",
    });
  });
});

describe("inspectPath on destination state", () => {
  it("reads legacy schema 1 as single-owner replace state and keeps its version", async () => {
    await writeState(root, v1State);

    const report = await inspectPath({ path: root });

    expect(report.kind).toBe("state");
    if (report.kind !== "state") return;
    expect(report.states).toEqual([
      {
        path: ".",
        state_file: ".distributor.json",
        schema_version: 1,
        mode: "single_owner",
        distributor_version: "0.9.0",
        created_at: "2026-05-30T11:12:00Z",
        updated_at: "2026-05-30T11:12:00Z",
        published_at: "2026-05-30T11:12:00Z",
        owners: [
          {
            pipeline_id: "reports",
            destination_id: "archive",
            reconciliation: "replace",
            source: {
              id: "reports.example.2026-05-30",
              created: "2026-05-30T11:00:00Z",
              digest: (embeddedManifest as { digest: string }).digest,
              files: 2,
            },
            outputs: 2,
          },
        ],
        outputs: [
          {
            path: "report.md",
            kind: "source",
            source_path: "report.md",
            ...reportDigest,
            created_at: "2026-05-30T11:12:00Z",
            updated_at: "2026-05-30T11:12:00Z",
            pipeline_id: "reports",
            destination_id: "archive",
          },
          {
            path: "summary.txt",
            kind: "source",
            source_path: "summary.txt",
            ...summaryDigest,
            created_at: "2026-05-30T11:12:00Z",
            updated_at: "2026-05-30T11:12:00Z",
            pipeline_id: "reports",
            destination_id: "archive",
          },
        ],
        lease: null,
      },
    ]);
  });

  it("shows the lease a run holds beside the state", async () => {
    await writeState(root, v2State);
    const lease = {
      format: "distributor-lease/1",
      owner: { pipeline_id: "reports", destination_id: "archive" },
      run_id: "8f1c6c0e-1111-4222-8333-944444444444",
      host: "build-7",
      pid: 4242,
      acquired_at: "2026-06-04T12:00:00.000Z",
      expires_at: "2026-06-04T12:01:00.000Z",
      journal: ["report.md"],
      directories: [""],
    };
    await writeFile(join(root, ".distributor.lease.json"), JSON.stringify(lease));

    const report = await inspectPath({ path: root });

    if (report.kind !== "state") throw new Error("expected state");
    expect(report.states[0]?.lease).toEqual({
      owner: lease.owner,
      run_id: lease.run_id,
      host: "build-7",
      pid: 4242,
      acquired_at: lease.acquired_at,
      expires_at: lease.expires_at,
      journal_entries: 1,
    });
  });

  it("reports schema 2 with its reconciliation mode and primary URL", async () => {
    await writeState(root, v2State);

    const report = await inspectPath({ path: join(root, ".distributor.json") });

    if (report.kind !== "state") throw new Error("expected state");
    const [state] = report.states;
    expect(state).toMatchObject({
      schema_version: 2,
      mode: "single_owner",
      created_at: "2026-05-29T08:00:00Z",
    });
    expect(state?.owners).toEqual([
      expect.objectContaining({
        reconciliation: "merge",
        primary_url: "https://reports.example.com/archive/report.md",
        outputs: 1,
      }),
    ]);
    expect(state?.outputs[0]?.url).toBe("https://reports.example.com/archive/report.md");
  });

  it("reports every owner of a shared root", async () => {
    await writeState(root, v3State);

    const report = await inspectStatePath({ path: root });

    const [state] = report.states;
    expect(state).toMatchObject({ schema_version: 3, mode: "shared_root" });
    expect(state?.published_at).toBeUndefined();
    expect(
      state?.owners.map((owner) => [owner.destination_id, owner.reconciliation, owner.outputs]),
    ).toEqual([
      ["archive", "replace", 1],
      ["html", "merge", 1],
    ]);
    expect(
      state?.outputs.map((output) => [output.path, output.destination_id, output.transform]),
    ).toEqual([
      ["report.md", "archive", undefined],
      ["report.html", "html", "markdown_to_html"],
    ]);
  });

  it("finds the state of every bundle path below a destination", async () => {
    await writeState(join(root, "2026", "b"), v2State);
    await writeState(join(root, "2026", "a"), v1State);
    await writeFiles(root, { "2026/a/report.md": REPORT });

    const report = await inspectPath({ path: root });

    if (report.kind !== "state") throw new Error("expected state");
    expect(
      report.states.map((state) => [state.path, state.state_file, state.schema_version]),
    ).toEqual([
      ["2026/a", "2026/a/.distributor.json", 1],
      ["2026/b", "2026/b/.distributor.json", 2],
    ]);
  });

  it("names the file and the problem of an invalid state", async () => {
    await writeState(root, { ...v2State, created_at: "yesterday" });

    const failure = await inspectPath({ path: root }).catch((error: unknown) => error);

    expect(failure).toMatchObject({ name: "StateError", code: "state_invalid" });
    expect((failure as Error).message).toContain(`local:${root}/.distributor.json`);
    expect((failure as Error).message).toContain("created_at must be RFC3339");
  });
});

describe("configured inspection", () => {
  function config() {
    return parseConfig(
      `pipelines:
  - id: reports
    source:
      backend: local
      path: ${join(root, "spool")}
    destinations:
      - id: archive
        backend: local
        path: ${join(root, "archive")}
`,
      { cwd: root },
    );
  }

  it("inspects one source bundle", async () => {
    await writeBundle(join(root, "spool", "one"), { "report.md": REPORT }, "one");
    await writeBundle(join(root, "spool", "two"), { "report.md": REPORT }, "two");

    const report = await inspectConfiguredSource({
      config: config(),
      pipelineId: "reports",
      bundlePath: "two",
    });

    expect(report).toMatchObject({ kind: "bundles", ok: true, pipeline_id: "reports" });
    expect(report.bundles.map((bundle) => bundle.manifest?.id)).toEqual(["two"]);
  });

  it("inspects a destination's state", async () => {
    await writeState(join(root, "archive"), v3State);

    const report = await inspectConfiguredDestination({
      config: config(),
      pipelineId: "reports",
      destinationId: "archive",
    });

    expect(report).toMatchObject({
      kind: "state",
      ok: true,
      location: `local:${join(root, "archive")}`,
      pipeline_id: "reports",
      destination_id: "archive",
    });
    expect(report.states.map((state) => state.mode)).toEqual(["shared_root"]);
  });

  it("reports no state for a destination never published to", async () => {
    await mkdir(join(root, "archive"));

    const report = await inspectConfiguredDestination({
      config: config(),
      pipelineId: "reports",
      destinationId: "archive",
    });

    expect(report.states).toEqual([]);
  });

  it("fails for an unknown destination", async () => {
    await expect(
      inspectConfiguredDestination({
        config: config(),
        pipelineId: "reports",
        destinationId: "nope",
      }),
    ).rejects.toMatchObject({
      code: "destination_not_found",
      message: "pipeline reports destination nope not found",
    });
  });
});
