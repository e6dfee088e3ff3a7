import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { join } from "node:path";
import { parseConfig } from "@distributor/publish";
import {
  createUploadClient,
  isUploadError,
  type UploadClient,
  type UploadError,
} from "@distributor/upload-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  checkWire,
  faultyBackends,
  OTHER_TOKEN,
  type Running,
  startServer,
  TOKEN,
  tree,
  uploadConfig,
  workspace,
  writeBundle,
} from "./helpers.js";

// `@distributor/upload-client` against the real `createUploadServer` on 127.0.0.1:0 with a real
// local destination: the client and the server speak one wire schema, and the client maps every
// refusal of docs/integrations/http-upload.md to its errors. (The client's own tests use a fake server only to inject
// faults the real one does not make: dropped connections, 503s, stalls.)

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

function clientOf(url: string, token = TOKEN, fetch?: typeof globalThis.fetch): UploadClient {
  // No retries: every answer the server gives is what the test sees.
  return createUploadClient({
    server: url,
    token,
    retry: { attempts: 1 },
    ...(fetch && { fetch }),
  });
}

/** A bundle directory of `files` below the workspace. */
async function bundle(
  id: string,
  files: Record<string, string | Buffer> = { "report.md": REPORT },
  created?: string,
): Promise<string> {
  const directory = await mkdtemp(join(root, "bundle-"));
  await writeBundle(directory, id, files as Record<string, string>, created);
  return directory;
}

async function refusal(promise: Promise<unknown>): Promise<UploadError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isUploadError(error)) throw new Error(`expected an UploadError, got ${String(error)}`);
  return error;
}

function gate() {
  let open: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { closed, open };
}

describe("upload client against the real server", () => {
  it("uploads, follows the run with long-polls to succeeded, and the bytes are published", async () => {
    const { url } = await serve(uploadConfig(root));
    const client = clientOf(url);
    const accepted = await client.upload(await bundle("reports.2026-06-04"), {
      pipeline: "reports",
    });
    expect(accepted).toMatchObject({
      pipeline_id: "reports",
      status: "queued",
      manifest: { id: "reports.2026-06-04" },
      status_url: `${url}/runs/${accepted.run_id}`,
      replayed: false,
    });

    const statuses: string[] = [];
    const finished = await client.waitForRun(accepted.run_id, {
      onStatus: (record) => statuses.push(record.status),
    });
    expect(finished).toMatchObject({
      run_id: accepted.run_id,
      status: "succeeded",
      error: null,
      manifest: accepted.manifest,
      result: { counts: { published: 1 }, interrupted: false },
    });
    expect(finished.result?.actions).toEqual([
      expect.objectContaining({ destination_id: "site", status: "published", error: null }),
    ]);
    // Each long-poll is answered when the run finishes or its wait is over; the last saw the end.
    expect(statuses.at(-1)).toBe("succeeded");
    expect(await tree(join(root, "site"))).toEqual([".distributor.json", "report.md"]);
    expect(await client.getRun(accepted.run_id)).toEqual(finished);
  });

  it("a retry with the same key returns the original run; another manifest under it is 409", async () => {
    const { url } = await serve(uploadConfig(root));
    const client = clientOf(url);
    const directory = await bundle("reports.idem");
    const first = await client.upload(directory, { pipeline: "reports", idempotencyKey: "k-1" });
    const again = await client.upload(directory, { pipeline: "reports", idempotencyKey: "k-1" });
    expect(first.replayed).toBe(false);
    expect(again).toEqual({ ...first, replayed: true });

    const changed = await bundle("reports.idem", { "report.md": "# Report\nRainy.\n" });
    const conflict = await refusal(
      client.upload(changed, { pipeline: "reports", idempotencyKey: "k-1" }),
    );
    expect(conflict).toMatchObject({
      status: 409,
      code: "idempotency_conflict",
      retryable: false,
    });
    expect(conflict.serverMessage).toEqual(expect.any(String));
    expect((await client.waitForRun(first.run_id)).status).toBe("succeeded");
  });

  it("maps 401, 403 and 404 to errors carrying the server's code and message", async () => {
    const { url } = await serve(uploadConfig(root));
    const directory = await bundle("reports.refused");

    const wrongToken = await refusal(
      clientOf(url, "not-a-token").upload(directory, { pipeline: "reports" }),
    );
    expect(wrongToken).toMatchObject({ status: 401, code: "unauthorized", retryable: false });
    expect(wrongToken.message).toContain("server answered 401 unauthorized: ");

    const otherPipeline = await refusal(
      clientOf(url, OTHER_TOKEN).upload(directory, { pipeline: "reports" }),
    );
    expect(otherPipeline).toMatchObject({ status: 403, code: "pipeline_not_allowed" });

    const client = clientOf(url);
    expect(await refusal(client.upload(directory, { pipeline: "nowhere" }))).toMatchObject({
      status: 404,
      code: "pipeline_not_found",
    });
    expect(await refusal(client.getRun("no-such-run"))).toMatchObject({
      status: 404,
      code: "run_not_found",
    });
    // Another token's run is as unknown as a missing one.
    const accepted = await client.upload(directory, { pipeline: "reports" });
    expect(await refusal(clientOf(url, OTHER_TOKEN).getRun(accepted.run_id))).toMatchObject({
      status: 404,
      code: "run_not_found",
    });
    await client.waitForRun(accepted.run_id);
  });

  it("maps 413, 415 and 422 to errors carrying the server's code and message", async () => {
    const config = parseConfig(
      `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 64KiB}
    validation: {max_files: 2}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "site")}
`,
      { sourceName: "test.yml" },
    );
    const { url } = await serve(config);
    const client = clientOf(url);

    // Random bytes do not compress: the archive is larger than max_upload_size.
    const large = await bundle("reports.large", { "data.bin": randomBytes(96 * 1024) });
    expect(await refusal(client.upload(large, { pipeline: "reports" }))).toMatchObject({
      status: 413,
      code: "upload_too_large",
      retryable: false,
    });

    // The client validated the bundle with the default limits; the pipeline allows fewer files.
    const many = await bundle("reports.many", { "a.md": "a\n", "b.md": "b\n", "c.md": "c\n" });
    const invalid = await refusal(client.upload(many, { pipeline: "reports" }));
    expect(invalid).toMatchObject({ status: 422, code: "bundle_invalid", retryable: false });
    expect(invalid.serverMessage).toMatch(/files/);

    // A proxy that rewrites the content type: the server refuses it.
    const rewriting: typeof globalThis.fetch = (input, init) =>
      globalThis.fetch(input, {
        ...init,
        headers: { ...(init?.headers as Record<string, string>), "content-type": "text/plain" },
      });
    const small = await bundle("reports.small");
    expect(
      await refusal(clientOf(url, TOKEN, rewriting).upload(small, { pipeline: "reports" })),
    ).toMatchObject({ status: 415, code: "unsupported_media_type" });
    expect(await tree(join(root, "site"))).toEqual([]);
  });

  it("sends as many files as validation.maxFiles says the pipeline accepts, and names that setting when it refuses", async () => {
    const config = parseConfig(
      `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
pipelines:
  - id: reports
    source: {backend: http_upload}
    validation: {max_files: 4}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "site")}
`,
      { sourceName: "test.yml" },
    );
    const { url } = await serve(config);
    const client = clientOf(url);
    const files = { "a.md": "a\n", "b.md": "b\n", "c.md": "c\n" };
    const three = await bundle("reports.three", files);

    // The producer's own limit refuses before a byte is sent, naming the producer's setting.
    const local = await client
      .upload(three, { pipeline: "reports", validation: { maxFiles: 2 } })
      .then(
        () => undefined,
        (error: unknown) => error as Error,
      );
    expect(local?.message).toContain(
      "manifest.json: lists 3 files, more than the upload's validation.maxFiles 2; raise validation.maxFiles of the upload up to as many files as the server's pipeline accepts",
    );
    expect(local?.message).not.toContain("pipeline's configuration");
    expect(await tree(join(root, "site"))).toEqual([]);

    // Raised to what the pipeline accepts, the bundle is sent and published.
    const accepted = await client.upload(three, {
      pipeline: "reports",
      validation: { maxFiles: 4 },
    });
    expect((await client.waitForRun(accepted.run_id)).status).toBe("succeeded");
    expect(await tree(join(root, "site"))).toEqual([".distributor.json", "a.md", "b.md", "c.md"]);
  });

  it("cancels a queued run and a running one, and lists the token's runs", async () => {
    const { closed, open } = gate();
    const { url } = await serve(uploadConfig(root), {
      backends: faultyBackends(join(root, "site"), { gate: closed }),
    });
    const client = clientOf(url);
    const first = await client.upload(
      await bundle("reports.c", { "a.md": "1\n" }, "2026-06-04T10:00:00Z"),
      { pipeline: "reports" },
    );
    // Runs of one pipeline never overlap: while the first holds the destination, the second waits.
    for (let record = await client.getRun(first.run_id); record.status !== "running"; ) {
      record = await client.getRun(first.run_id, { waitMs: 1000 });
    }
    const second = await client.upload(
      await bundle("reports.c", { "a.md": "2\n" }, "2026-06-04T11:00:00Z"),
      { pipeline: "reports" },
    );

    const page = await client.listRuns({ pipeline: "reports" });
    expect(page.runs.map((run) => [run.run_id, run.status])).toEqual([
      [second.run_id, "queued"],
      [first.run_id, "running"],
    ]);
    expect(page.next_cursor).toBeNull();
    expect((await clientOf(url, OTHER_TOKEN).listRuns()).runs).toEqual([]);

    const queued = await client.cancelRun(second.run_id);
    expect(queued.cancelRequested).toBe(false);
    expect(queued.record).toMatchObject({
      run_id: second.run_id,
      status: "failed",
      error: { code: "cancelled" },
    });
    expect(await refusal(client.cancelRun(second.run_id))).toMatchObject({
      status: 409,
      code: "run_finished",
    });

    const runningCancel = await client.cancelRun(first.run_id);
    expect(runningCancel).toMatchObject({ cancelRequested: true, record: { status: "running" } });
    open();
    const stopped = await client.waitForRun(first.run_id);
    expect(stopped.status).toBe("failed");

    const failed = await client.listRuns({ status: "failed", limit: 1 });
    expect(failed.runs.map((run) => run.run_id)).toEqual([second.run_id]);
    expect(failed.next_cursor).not.toBeNull();
    const next = await client.listRuns({
      status: "failed",
      limit: 1,
      cursor: failed.next_cursor ?? "",
    });
    expect(next.runs.map((run) => run.run_id)).toEqual([first.run_id]);
    expect(await refusal(client.listRuns({ limit: 0 }))).toMatchObject({
      status: 400,
      code: "bad_request",
    });
  });

  it("the server tests' wire check refuses an answer that is not its record", () => {
    const record = { run_id: "r", pipeline_id: "reports", status: "queued" };
    expect(() => checkWire("GET", "/runs/r", 200, record)).toThrow(
      "GET /runs/r answered 200 with a body that is not its wire record: accepted_at is missing",
    );
    expect(() => checkWire("GET", "/runs/r", 404, { error: { code: "run_not_found" } })).toThrow(
      /error\.message is missing/,
    );
    expect(() => checkWire("GET", "/healthz", 200, { ok: true })).not.toThrow();
  });
});
