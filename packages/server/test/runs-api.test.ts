import { mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import { pipelineConfigDigest } from "@distributor/publish";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openEmbeddedUploadStore } from "../src/store/embedded-store.js";
import {
  bundleArchive,
  checkWire,
  emptied,
  faultyBackends,
  getJson,
  OTHER_TOKEN,
  type Running,
  startServer,
  TOKEN,
  upload,
  uploadConfig,
  waitForRun,
  workspace,
  writeBundle,
} from "./helpers.js";

// Run listing, cancel, long-poll and restart recovery of the upload server (docs/integrations/http-upload.md), over real
// HTTP with the embedded store on disk.

const REPORT = "# Report\nSunny.\n";

let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running[] = [];

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
});
afterEach(async () => {
  for (const { server } of running) await server.close();
  running = [];
  await removeWorkspace();
});

async function serve(...args: Parameters<typeof startServer>): Promise<Running> {
  const started = await startServer(...args);
  running.push(started);
  return started;
}

function gate() {
  let open: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { closed, open };
}

async function post(url: string, path: string, token = TOKEN) {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}` },
  });
  const json = (await response.json()) as Record<string, unknown>;
  checkWire("POST", path, response.status, json);
  return { status: response.status, json };
}

async function untilStatus(url: string, runId: string, status: string) {
  for (let i = 0; (await getJson(url, `/runs/${runId}`)).json.status !== status; i++) {
    if (i > 400) throw new Error(`run ${runId} never became ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("run API", () => {
  it("lists the token's runs newest first, filtered by pipeline and status, paged", async () => {
    const { url } = await serve(uploadConfig(root));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const archive = await bundleArchive(
        root,
        "reports.list",
        { "r.md": `${i}\n` },
        `2026-06-04T1${i}:00:00Z`,
      );
      const accepted = await upload(url, archive);
      ids.push(accepted.json.run_id as string);
      await waitForRun(url, accepted.json.run_id as string);
    }
    const other = await upload(url, await bundleArchive(root, "other.list", { "o.md": "o\n" }), {
      token: OTHER_TOKEN,
      pipeline: "other",
    });
    await waitForRun(url, other.json.run_id as string, OTHER_TOKEN);

    const first = await getJson(url, "/runs?limit=2");
    expect(first.status).toBe(200);
    expect((first.json.runs as { run_id: string }[]).map((r) => r.run_id)).toEqual([
      ids[2],
      ids[1],
    ]);
    const next = first.json.next_cursor as string;
    const second = await getJson(url, `/runs?limit=2&cursor=${next}`);
    expect((second.json.runs as { run_id: string }[]).map((r) => r.run_id)).toEqual([ids[0]]);
    expect(second.json.next_cursor).toBeNull();
    const filtered = await getJson(url, "/runs?pipeline=reports&status=succeeded");
    expect((filtered.json.runs as unknown[]).length).toBe(3);
    expect((await getJson(url, "/runs?status=failed")).json.runs).toEqual([]);
    expect((await getJson(url, "/runs?status=done")).status).toBe(400);
    expect((await getJson(url, "/runs?limit=0")).status).toBe(400);
    expect((await getJson(url, "/runs", null)).status).toBe(401);
  });

  it("answers a long-poll when the run finishes, and at once for a finished run", async () => {
    const { closed, open } = gate();
    const { url } = await serve(uploadConfig(root), {
      backends: faultyBackends(join(root, "site"), { gate: closed }),
    });
    const accepted = await upload(url, await bundleArchive(root, "reports.w", { "r.md": REPORT }));
    const runId = accepted.json.run_id as string;
    const started = Date.now();
    const polling = getJson(url, `/runs/${runId}?wait=20s`);
    setTimeout(open, 300);
    const answered = await polling;
    expect(answered.json.status).toBe("succeeded");
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(10_000);
    const again = Date.now();
    expect((await getJson(url, `/runs/${runId}?wait=20s`)).json.status).toBe("succeeded");
    expect(Date.now() - again).toBeLessThan(1_000);
    expect((await getJson(url, `/runs/${runId}?wait=soon`)).status).toBe(400);
  });

  it("cancels a queued run at once and a running run at its next safe point", async () => {
    const { closed, open } = gate();
    const { url } = await serve(uploadConfig(root), {
      backends: faultyBackends(join(root, "site"), { gate: closed }),
    });
    const first = await upload(
      url,
      await bundleArchive(root, "reports.c", { "a.md": "1\n" }, "2026-06-04T10:00:00Z"),
    );
    const firstId = first.json.run_id as string;
    await untilStatus(url, firstId, "running");
    const second = await upload(
      url,
      await bundleArchive(root, "reports.c", { "a.md": "2\n" }, "2026-06-04T11:00:00Z"),
    );
    const secondId = second.json.run_id as string;

    const queued = await post(url, `/runs/${secondId}/cancel`);
    expect(queued.status).toBe(200);
    expect(queued.json).toMatchObject({ status: "failed", error: { code: "cancelled" } });
    expect((await post(url, `/runs/${secondId}/cancel`)).status).toBe(409);
    expect((await post(url, `/runs/${firstId}/cancel`, OTHER_TOKEN)).status).toBe(404);

    const runningCancel = await post(url, `/runs/${firstId}/cancel`);
    expect(runningCancel.status).toBe(202);
    expect(runningCancel.json).toMatchObject({ status: "running", cancel_requested: true });
    open();
    const finished = await waitForRun(url, firstId);
    expect(finished).toMatchObject({ status: "failed", error: { code: "cancelled" } });
    expect((finished.result as { interrupted: boolean }).interrupted).toBe(true);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });
});

describe("restart", () => {
  it("resumes a run the store holds and removes staged data of no live run", async () => {
    const config = uploadConfig(root);
    const staging = config.server.http.stagingDirectory;
    await mkdir(staging, { recursive: true, mode: 0o700 });
    // What a killed server leaves: a run recorded `running` with its staged bundle, an orphan.
    const live = join(staging, "upload-live");
    await writeBundle(join(live, "top"), "reports.resumed", { "r.md": REPORT });
    await mkdir(join(staging, "upload-orphan", "x"), { recursive: true });
    const store = await openEmbeddedUploadStore({
      path: config.server.store.path,
      queueSize: 8,
      retentionMs: 3_600_000,
      maxRuns: 100,
    });
    const manifest = { id: "reports.resumed", digest: "sha256:x", created: "2026-06-04T11:55:00Z" };
    await store.reserveQueueSlot();
    await store.enqueue(
      {
        tokenId: "reporter",
        record: {
          run_id: "resumed-run",
          pipeline_id: "reports",
          status: "queued",
          accepted_at: "2026-06-04T12:00:00Z",
          started_at: null,
          finished_at: null,
          manifest,
          result: null,
          error: null,
        },
      },
      {
        runId: "resumed-run",
        pipelineId: "reports",
        stagingDirectory: live,
        bundleDirectory: join(live, "top"),
      },
      {
        run_id: "resumed-run",
        pipeline_id: "reports",
        status: "queued",
        manifest,
        status_url: "/runs/resumed-run",
      },
      { tokenId: "reporter", pipelineId: "reports", key: "resume-key" },
    );
    await store.takeNext(new Set());
    await store.updateRun("resumed-run", { status: "running", started_at: "2026-06-04T12:00:01Z" });
    await store.close();

    const { url, events } = await serve(config);
    expect(events.find((e) => e.type === "recovered")).toEqual({
      type: "recovered",
      resumed: 1,
      removed_staging: 1,
      lost: 0,
    });
    expect(await waitForRun(url, "resumed-run")).toMatchObject({ status: "succeeded" });
    expect(await emptied(staging)).toEqual([]);
    expect(await readdir(join(root, "site"))).toContain("r.md");
  });

  it("fails a queued run whose pipeline is configured otherwise since it was accepted", async () => {
    // Accepted (and queued) by a server whose `reports` wrote to site/, which was then killed;
    // the server starts again with `reports` writing to elsewhere/.
    const config = uploadConfig(root);
    const staging = config.server.http.stagingDirectory;
    await mkdir(staging, { recursive: true, mode: 0o700 });
    const live = join(staging, "upload-queued");
    await writeBundle(join(live, "top"), "reports.queued", { "r.md": REPORT });
    const store = await openEmbeddedUploadStore({
      path: config.server.store.path,
      queueSize: 8,
      retentionMs: 3_600_000,
      maxRuns: 100,
    });
    const manifest = { id: "reports.queued", digest: "sha256:x", created: "2026-06-04T11:55:00Z" };
    const original = config.pipelines.find((p) => p.id === "reports");
    if (original === undefined) throw new Error("no reports pipeline");
    await store.reserveQueueSlot();
    await store.enqueue(
      {
        tokenId: "reporter",
        record: {
          run_id: "queued-run",
          pipeline_id: "reports",
          status: "queued",
          accepted_at: "2026-06-04T12:00:00Z",
          started_at: null,
          finished_at: null,
          manifest,
          result: null,
          error: null,
        },
      },
      {
        runId: "queued-run",
        pipelineId: "reports",
        stagingDirectory: live,
        bundleDirectory: join(live, "top"),
        configDigest: pipelineConfigDigest(original),
      },
      {
        run_id: "queued-run",
        pipeline_id: "reports",
        status: "queued",
        manifest,
        status_url: "/runs/queued-run",
      },
      undefined,
    );
    await store.close();

    const moved = config.pipelines.map((p) =>
      p.id !== "reports"
        ? p
        : {
            ...p,
            destinations: p.destinations.map((d) => ({
              ...d,
              location: { ...d.location, path: join(root, "elsewhere") },
            })),
          },
    );
    const { url } = await serve({ ...config, pipelines: moved });
    const finished = await waitForRun(url, "queued-run");
    expect(finished).toMatchObject({ status: "failed", error: { code: "config_changed" } });
    expect(JSON.stringify(finished)).toContain(
      "pipeline reports is configured otherwise than when this upload was accepted",
    );
    await expect(readdir(join(root, "elsewhere"))).rejects.toThrow();
    await expect(readdir(join(root, "site"))).rejects.toThrow();
    expect(await emptied(staging)).toEqual([]);
  });
});
