import { once } from "node:events";
import { chmod, mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { parseConfig } from "@distributor/publish";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createUploadServer } from "../src/index.js";
import {
  bundleArchive,
  checkWire,
  emptied,
  faultyBackends,
  getJson,
  OTHER_TOKEN,
  packDirectory,
  type Running,
  rawTar,
  startServer,
  streamUntilAnswered,
  TOKEN,
  TOKEN_ENV,
  tree,
  upload,
  uploadConfig,
  validEntries,
  waitForRun,
  withoutStore,
  workspace,
  writeBundle,
} from "./helpers.js";

// The HTTP upload API of docs/integrations/http-upload.md over real HTTP on 127.0.0.1:0, with real staging and
// destination directories. Fakes only inject destination faults.

const REPORT = "# Report\nSunny.\n";
const LIMITED = `    validation: {max_total_size: 1MB}`;

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

/** The reports pipeline's config with the validation limit the gzip bomb meets. */
function limitedConfig(http = "") {
  const config = uploadConfig(root);
  const text = `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "staging")}
${http}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 64KiB}
${LIMITED}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
`;
  return config && parseConfig(text, { sourceName: "limited.yml" });
}

describe("upload server", () => {
  it("answers healthz, unknown endpoints and wrong methods", async () => {
    const { url } = await serve(uploadConfig(root));
    expect(await getJson(url, "/healthz", null)).toMatchObject({ status: 200, json: { ok: true } });
    const missing = await getJson(url, "/nowhere");
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ error: { code: "not_found", message: expect.any(String) } });
    const wrong = await fetch(`${url}/pipelines/reports/uploads`);
    expect(wrong.status).toBe(405);
    checkWire("GET", "/pipelines/reports/uploads", 405, await wrong.json());
    expect(wrong.headers.get("allow")).toBe("POST");
  });

  it("accepts an upload, publishes it and reports the lifecycle through succeeded", async () => {
    const { url, events } = await serve(uploadConfig(root));
    const archive = await bundleArchive(root, "reports.2026-06-04", { "report.md": REPORT });
    const accepted = await upload(url, archive);
    expect(accepted.status).toBe(202);
    const runId = accepted.json.run_id as string;
    expect(accepted.json).toEqual({
      run_id: runId,
      pipeline_id: "reports",
      status: "queued",
      manifest: {
        id: "reports.2026-06-04",
        digest: "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
        created: "2026-06-04T11:55:00Z",
      },
      status_url: `/runs/${runId}`,
    });
    expect(accepted.headers.get("location")).toBe(`/runs/${runId}`);

    const finished = await waitForRun(url, runId);
    expect(finished).toMatchObject({
      run_id: runId,
      pipeline_id: "reports",
      status: "succeeded",
      manifest: accepted.json.manifest,
      error: null,
    });
    for (const field of ["accepted_at", "started_at", "finished_at"]) {
      expect(Date.parse(finished[field] as string)).not.toBeNaN();
    }
    // The record keeps a bounded summary of the report: no list of outputs.
    expect(finished.result).toEqual({
      counts: { published: 1 },
      actions: [
        {
          destination_id: "site",
          bundle_path: ".",
          action: "publish_new",
          status: "published",
          primary_url: null,
          release_id: null,
          preview_url: null,
          outputs: 1,
          error: null,
        },
      ],
      pipeline_errors: [],
      interrupted: false,
    });
    expect(await readFile(join(root, "site", "report.md"), "utf8")).toBe(REPORT);
    expect(await emptied(join(root, "staging"))).toEqual([]);

    const lines = events.map((event) => JSON.stringify(event));
    expect(lines.some((line) => line.includes(TOKEN))).toBe(false);
    expect(events.filter((e) => e.type === "run")).toEqual([
      expect.objectContaining({ run_id: runId, status: "succeeded", error: null }),
    ]);
    expect(events.find((e) => e.type === "request" && e.status === 202)).toMatchObject({
      method: "POST",
      path: "/pipelines/reports/uploads",
      token_id: "reporter",
      pipeline_id: "reports",
      run_id: runId,
    });
  });

  it("publishes a bundle in the archive's single top-level directory where path_mapping says, ignoring the directory's name", async () => {
    const { url } = await serve(uploadConfig(root));
    const directory = join(root, "plain");
    await writeBundle(join(directory, "chosen-by-producer"), "reports.plain", {
      "docs/a.txt": "A\n",
    });
    const accepted = await upload(url, await packDirectory(directory, false), {
      contentType: "application/x-tar",
    });
    expect(accepted.status).toBe(202);
    expect((await waitForRun(url, accepted.json.run_id as string)).status).toBe("succeeded");
    expect(await readFile(join(root, "site", "docs", "a.txt"), "utf8")).toBe("A\n");
    expect(await tree(join(root, "site"))).not.toContain("chosen-by-producer");
  });

  it("says so when a body declared gzip is not gzip, or is neither gzip nor tar", async () => {
    const { url } = await serve(uploadConfig(root));
    const tarBody = rawTar(validEntries());
    const notGzip = await upload(url, tarBody, { contentType: "application/gzip" });
    expect(notGzip.status).toBe(422);
    expect(notGzip.json.error).toMatchObject({
      code: "invalid_archive",
      message: expect.stringMatching(/upload body is not gzip .*Content-Type is application\/gzip/),
    });
    const neither = await upload(url, Buffer.alloc(2048, 65), { contentType: "application/x-tar" });
    expect(neither.status).toBe(422);
    expect((neither.json.error as { message: string }).message).toMatch(/neither gzip nor a tar/);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("bounds extraction by 32 times max_upload_size even when validation allows more", async () => {
    // max_upload_size 64KiB allows 2 MiB extracted; validation's default allows 10 GB.
    const { url } = await serve(uploadConfig(root));
    const bomb = rawTar(
      [...validEntries(), { path: "zeros", body: Buffer.alloc(8 * 1024 * 1024) }],
      true,
    );
    expect(bomb.length).toBeLessThan(64 * 1024);
    const refused = await upload(url, bomb);
    expect(refused.status).toBe(413);
    expect(refused.json.error).toMatchObject({ code: "extracted_size_exceeded" });
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("refuses missing and wrong tokens (401), other pipelines (403) and unknown ones (404)", async () => {
    const { url } = await serve(uploadConfig(root));
    const archive = await bundleArchive(root, "reports.auth", { "report.md": REPORT });
    for (const token of [null, "wrong-token"]) {
      const refused = await upload(url, archive, { token });
      expect(refused.status).toBe(401);
      expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(refused.json.error).toMatchObject({ code: "unauthorized" });
    }
    const forbidden = await upload(url, archive, { token: OTHER_TOKEN });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json.error).toMatchObject({ code: "pipeline_not_allowed" });
    const unknown = await upload(url, archive, { pipeline: "nope" });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ code: "pipeline_not_found" });
    expect((await getJson(url, "/runs/some-run", null)).status).toBe(401);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("keeps each token's runs to itself and answers 404 for unknown runs", async () => {
    const { url } = await serve(uploadConfig(root));
    const accepted = await upload(
      url,
      await bundleArchive(root, "reports.own", { "report.md": REPORT }),
    );
    const runId = accepted.json.run_id as string;
    expect((await getJson(url, `/runs/${runId}`)).status).toBe(200);
    expect((await getJson(url, `/runs/${runId}`, OTHER_TOKEN)).status).toBe(404);
    const unknown = await getJson(url, "/runs/00000000-0000-0000-0000-000000000000");
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatchObject({ code: "run_not_found" });
    await waitForRun(url, runId);
  });

  it("refuses a bad idempotency key (400) and an unsupported content type (415)", async () => {
    const { url } = await serve(uploadConfig(root));
    const archive = await bundleArchive(root, "reports.bad", { "report.md": REPORT });
    for (const key of ["has space", "x".repeat(256), "caf\u00e9"]) {
      const refused = await upload(url, archive, { key });
      expect(refused.status, key).toBe(400);
      expect(refused.json.error).toMatchObject({ code: "invalid_idempotency_key" });
    }
    const refused = await upload(url, archive, { contentType: "application/zip" });
    expect(refused.status).toBe(415);
    expect(refused.json.error).toMatchObject({ code: "unsupported_media_type" });
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("answers 413 for a declared length over max_upload_size without reading the body", async () => {
    const { url } = await serve(uploadConfig(root));
    const answered = await streamUntilAnswered(
      url,
      "/pipelines/reports/uploads",
      {
        Authorization: `Bearer ${TOKEN}`,
        "Content-Type": "application/gzip",
        "Content-Length": String(10 * 1024 * 1024),
      },
      Buffer.alloc(16 * 1024),
      10 * 1024 * 1024,
    );
    expect(answered.status).toBe(413);
    expect(JSON.parse(answered.body).error.code).toBe("upload_too_large");
    expect(answered.sent).toBeLessThan(10 * 1024 * 1024);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("answers 413 for a streamed body as soon as it passes max_upload_size", async () => {
    const { url } = await serve(uploadConfig(root));
    // A chunked body the client would keep sending for 64 MiB; the limit is 64 KiB.
    const answered = await streamUntilAnswered(
      url,
      "/pipelines/reports/uploads",
      { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-tar" },
      rawTar([{ path: "big", body: Buffer.alloc(16 * 1024 - 1536, 7) }]).subarray(0, 16 * 1024),
      64 * 1024 * 1024,
    );
    expect(answered.status).toBe(413);
    expect(answered.headers.connection).toBe("close");
    expect(JSON.parse(answered.body).error.code).toBe("upload_too_large");
    expect(answered.sent).toBeLessThan(8 * 1024 * 1024);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("lets a client that is still sending a refused body finish it and read the answer", async () => {
    const { url } = await serve(uploadConfig(root));
    const { port } = new URL(url);
    // A slow producer: 160 KiB in 16 KiB chunks, 20 ms apart, over a 64 KiB limit. Closing the
    // connection as soon as the answer is written would reset it under the later chunks.
    const socket = connect({ port: Number(port), host: "127.0.0.1", allowHalfOpen: true });
    const received: Buffer[] = [];
    let bodySent = false;
    let endedEarly = false;
    const outcome = new Promise<{ error?: Error }>((resolve) => {
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      socket.on("end", () => {
        endedEarly = !bodySent;
        socket.end();
      });
      socket.on("error", (error) => resolve({ error }));
      socket.on("close", () => resolve({}));
    });
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(
      "POST /pipelines/reports/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
        `Authorization: Bearer ${TOKEN}\r\nContent-Type: application/x-tar\r\n` +
        "Transfer-Encoding: chunked\r\n\r\n",
    );
    const tar = rawTar([{ path: "big", body: Buffer.alloc(160 * 1024, 7) }]);
    for (let offset = 0; offset < tar.length; offset += 16 * 1024) {
      const chunk = tar.subarray(offset, offset + 16 * 1024);
      socket.write(`${chunk.length.toString(16)}\r\n`);
      socket.write(chunk);
      socket.write("\r\n");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    socket.write("0\r\n\r\n", () => {
      bodySent = true;
    });
    const { error } = await outcome;
    expect(error).toBeUndefined();
    // The server closed its side only after it had read the whole body: nothing was reset.
    expect(endedEarly).toBe(false);
    const answer = Buffer.concat(received).toString("utf8");
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)).error.code).toBe(
      "upload_too_large",
    );
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("cuts off a client that keeps sending a refused body after the drain limit", async () => {
    const { url } = await serve(uploadConfig(root));
    const { port } = new URL(url);
    const socket = connect({ port: Number(port), host: "127.0.0.1" });
    const received: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => received.push(chunk));
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.on("error", () => undefined);
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    const limit = 64 * 1024 * 1024;
    socket.write(
      "POST /pipelines/reports/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
        `Authorization: Bearer ${TOKEN}\r\nContent-Type: application/gzip\r\n` +
        `Content-Length: ${limit}\r\n\r\n`,
    );
    // Ignores the answer and sends on, as fast as the connection takes it.
    const chunk = Buffer.alloc(64 * 1024);
    let sent = 0;
    while (sent < limit && !socket.destroyed) {
      sent += chunk.length;
      if (!socket.write(chunk)) {
        // A cut connection fails the wait for "drain"; the loop then sees it destroyed.
        await Promise.race([once(socket, "drain").catch(() => undefined), closed]);
      }
    }
    await closed;
    expect(sent).toBeLessThan(limit);
    expect(Buffer.concat(received).toString("utf8")).toMatch(/^HTTP\/1\.1 413 /);
  });

  it.each([
    ["a ../ path", { path: "../x", body: "x" }, 422, "unsafe_path"],
    ["an absolute path", { path: "/etc/x", body: "x" }, 422, "unsafe_path"],
    [
      "a symlink",
      { path: "link", type: "SymbolicLink", linkpath: "/etc/passwd" },
      422,
      "unsupported_entry",
    ],
    ["a hardlink", { path: "hard", type: "Link", linkpath: "report.md" }, 422, "unsupported_entry"],
    ["a device", { path: "dev", type: "CharacterDevice" }, 422, "unsupported_entry"],
    ["a duplicate path", { path: "report.md", body: "other" }, 422, "duplicate_entry"],
    ["a reserved name", { path: "sub/.distributor.json", body: "{}" }, 422, "reserved_name"],
  ] as const)(
    "refuses an archive with %s, writing nothing outside staging",
    async (_name, entry, status, code) => {
      const { url } = await serve(uploadConfig(root));
      const refused = await upload(url, rawTar([...validEntries(), entry], true));
      expect(refused.status).toBe(status);
      expect(refused.json.error).toMatchObject({ code });
      expect(await emptied(join(root, "staging"))).toEqual([]);
      expect(withoutStore(await tree(root))).toEqual(["staging"]);
    },
  );

  it("stops a gzip bomb at the extracted-size limit (413) and empties staging", async () => {
    const { url } = await serve(limitedConfig());
    const bomb = rawTar(
      [...validEntries(), { path: "zeros", body: Buffer.alloc(32 * 1024 * 1024) }],
      true,
    );
    expect(bomb.length).toBeLessThan(64 * 1024);
    const refused = await upload(url, bomb);
    expect(refused.status).toBe(413);
    expect(refused.json.error).toMatchObject({ code: "extracted_size_exceeded" });
    expect(withoutStore(await tree(root))).toEqual(["staging"]);
  });

  it("answers 422 naming the problem for an invalid bundle and for a non-archive", async () => {
    const { url } = await serve(uploadConfig(root));
    const [manifest] = validEntries();
    const refused = await upload(
      url,
      rawTar(
        [manifest ?? { path: "manifest.json" }, { path: "report.md", body: "# Report\nRainy.\n" }],
        true,
      ),
    );
    expect(refused.status).toBe(422);
    expect(refused.json.error).toMatchObject({ code: "bundle_invalid" });
    expect((refused.json.error as { message: string }).message).toMatch(
      /report\.md: sha256 mismatch/,
    );
    const garbage = await upload(url, Buffer.from("this is not an archive at all"), {
      contentType: "application/x-tar",
    });
    expect(garbage.status).toBe(422);
    expect(garbage.json.error).toMatchObject({ code: "invalid_archive" });
    expect(withoutStore(await tree(root))).toEqual(["staging"]);
  });

  it("replays an accepted upload for the same key and manifest, 409 for another manifest", async () => {
    const { url, events } = await serve(uploadConfig(root));
    const archive = await bundleArchive(root, "reports.key", { "report.md": REPORT });
    const first = await upload(url, archive, { key: "upload-1" });
    expect(first.status).toBe(202);
    const again = await upload(url, archive, { key: "upload-1" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.json).toEqual(first.json);

    const changed = await bundleArchive(root, "reports.key", { "report.md": "# Other\n" });
    const conflict = await upload(url, changed, { key: "upload-1" });
    expect(conflict.status).toBe(409);
    expect(conflict.json.error).toMatchObject({ code: "idempotency_conflict" });

    // The same key of another token and pipeline is another key.
    const other = await upload(url, archive, {
      key: "upload-1",
      token: OTHER_TOKEN,
      pipeline: "other",
    });
    expect(other.status).toBe(202);
    await waitForRun(url, first.json.run_id as string);
    await waitForRun(url, other.json.run_id as string, OTHER_TOKEN);
    expect(events.filter((e) => e.type === "run")).toHaveLength(2);
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("runs once for two concurrent uploads with one key", async () => {
    const { url, events } = await serve(uploadConfig(root));
    const archive = await bundleArchive(root, "reports.twice", { "report.md": REPORT });
    const answers = await Promise.all([
      upload(url, archive, { key: "same" }),
      upload(url, archive, { key: "same" }),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 202]);
    expect(answers[0]?.json.run_id).toBe(answers[1]?.json.run_id);
    await waitForRun(url, answers[0]?.json.run_id as string);
    expect(events.filter((e) => e.type === "run")).toHaveLength(1);
  });

  it("reports failed with the destination's error", async () => {
    const config = uploadConfig(root);
    const { url } = await serve(config, {
      backends: faultyBackends(join(root, "site"), { fail: new Error("disk on fire") }),
    });
    const accepted = await upload(
      url,
      await bundleArchive(root, "reports.f", { "report.md": REPORT }),
    );
    const finished = await waitForRun(url, accepted.json.run_id as string);
    expect(finished.status).toBe("failed");
    expect(finished.error).toMatchObject({ code: "destination_failed" });
    expect((finished.error as { message: string }).message).toContain("disk on fire");
    const result = finished.result as {
      counts: Record<string, number>;
      actions: { status: string; error: { code: string; message: string } }[];
    };
    expect(result.counts).toEqual({ failed: 1 });
    expect(result.actions[0]?.status).toBe("failed");
    expect(result.actions[0]?.error.message).toContain("disk on fire");
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("forgets finished runs and their keys after the retention", async () => {
    let clock = new Date("2026-06-04T12:00:00Z");
    const { url } = await serve(uploadConfig(root), { now: () => clock });
    const archive = await bundleArchive(root, "reports.ret", { "report.md": REPORT });
    const first = await upload(url, archive, { key: "k" });
    const runId = first.json.run_id as string;
    await waitForRun(url, runId);
    clock = new Date("2026-06-04T12:59:00Z");
    expect((await getJson(url, `/runs/${runId}`)).status).toBe(200);
    expect((await upload(url, archive, { key: "k" })).status).toBe(200);
    clock = new Date("2026-06-04T13:00:01Z");
    expect((await getJson(url, `/runs/${runId}`)).status).toBe(404);
    const fresh = await upload(url, archive, { key: "k" });
    expect(fresh.status).toBe(202);
    expect(fresh.json.run_id).not.toBe(runId);
    await waitForRun(url, fresh.json.run_id as string);
  });

  it("queues runs of one pipeline one after another and answers 503 when the queue is full", async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { url } = await serve(limitedConfig("    queue_size: 1\n    workers: 2"), {
      backends: faultyBackends(join(root, "site"), { gate }),
    });
    const first = await upload(
      url,
      await bundleArchive(root, "reports.q", { "a.md": "1\n" }, "2026-06-04T10:00:00Z"),
    );
    expect(first.status).toBe(202);
    const firstId = first.json.run_id as string;
    for (let i = 0; (await getJson(url, `/runs/${firstId}`)).json.status !== "running"; i++) {
      if (i > 200) throw new Error("first run never started");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const secondArchive = await bundleArchive(
      root,
      "reports.q",
      { "a.md": "2\n" },
      "2026-06-04T11:00:00Z",
    );
    const second = await upload(url, secondArchive, { key: "second" });
    expect(second.status).toBe(202);
    const full = await upload(
      url,
      await bundleArchive(root, "reports.q", { "a.md": "3\n" }, "2026-06-04T12:00:00Z"),
    );
    expect(full.status).toBe(503);
    expect(full.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(full.json.error).toMatchObject({ code: "queue_full" });
    // A replay stages its body as well, so it needs a place too.
    expect((await upload(url, secondArchive, { key: "second" })).status).toBe(503);
    // A free worker does not start a second run of the same pipeline.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await getJson(url, `/runs/${second.json.run_id}`)).json.status).toBe("queued");
    open();
    expect((await waitForRun(url, firstId)).status).toBe("succeeded");
    const secondRun = await waitForRun(url, second.json.run_id as string);
    expect(secondRun.error).toBeNull();
    expect(secondRun.status).toBe("succeeded");
    expect(await readFile(join(root, "site", "a.md"), "utf8")).toBe("2\n");
    const replayed = await upload(url, secondArchive, { key: "second" });
    expect(replayed.status).toBe(200);
    expect(replayed.json.run_id).toBe(second.json.run_id);
  });

  it("shuts down gracefully: refuses new connections and lets the running run finish", async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const started = await serve(uploadConfig(root), {
      backends: faultyBackends(join(root, "site"), { gate }),
    });
    const accepted = await upload(
      started.url,
      await bundleArchive(root, "reports.s", { "r.md": "r\n" }),
    );
    const runId = accepted.json.run_id as string;
    for (let i = 0; (await getJson(started.url, `/runs/${runId}`)).json.status !== "running"; i++) {
      if (i > 200) throw new Error("run never started");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    let closed = false;
    const closing = started.server.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(false);
    await expect(fetch(`${started.url}/healthz`)).rejects.toThrow();
    open();
    await closing;
    expect(await readFile(join(root, "site", "r.md"), "utf8")).toBe("r\n");
    expect(started.events.find((e) => e.type === "run")).toMatchObject({ status: "succeeded" });
    expect(await emptied(join(root, "staging"))).toEqual([]);
  });

  it("fails startup for a missing, empty or duplicated token, naming the reference", async () => {
    const config = uploadConfig(root);
    await expect(createUploadServer({ config, env: { OTHER_TOKEN } })).rejects.toThrow(
      /upload_tokens\[0\] \(id reporter\): secret REPORTER_TOKEN is not available/,
    );
    await expect(
      createUploadServer({ config, env: { ...TOKEN_ENV, REPORTER_TOKEN: "" } }),
    ).rejects.toThrow(/REPORTER_TOKEN/);
    await expect(
      createUploadServer({ config, env: { ...TOKEN_ENV, REPORTER_TOKEN: " \t\n" } }),
    ).rejects.toThrow(
      /upload_tokens\[0\] \(id reporter\): secret REPORTER_TOKEN holds only whitespace/,
    );
    const twin = createUploadServer({ config, env: { REPORTER_TOKEN: TOKEN, OTHER_TOKEN: TOKEN } });
    await expect(twin).rejects.toThrow(/upload_tokens\[1\] \(id other\) has the same value/);
    await twin.catch((error: Error) => expect(error.message).not.toContain(TOKEN));
  });

  it("warns about a token file that other users may read", async () => {
    const secrets = join(root, "secrets");
    await mkdir(secrets);
    await writeFile(join(secrets, "REPORTER_TOKEN"), TOKEN, { mode: 0o644 });
    const config = parseConfig(
      `server: {http: {staging_directory: ${join(root, "staging")}}}
secrets: {directory: ${secrets}}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations: [{id: site, backend: local, path: ${join(root, "site")}}]
`,
      { sourceName: "secrets.yml" },
    );
    const events: unknown[] = [];
    const server = await createUploadServer({ config, env: {}, onEvent: (e) => events.push(e) });
    await server.close();
    expect(events).toContainEqual({
      type: "warning",
      message: `upload_tokens[0] (id reporter): secret file ${join(secrets, "REPORTER_TOKEN")} may be read by other users (mode 644); chmod 600 it`,
    });
  });

  it("refuses a staging directory that is a symlink or that other users may write", async () => {
    const config = uploadConfig(root);
    const staging = join(root, "staging");
    await mkdir(join(root, "elsewhere"));
    await symlink(join(root, "elsewhere"), staging);
    await expect(createUploadServer({ config, env: TOKEN_ENV })).rejects.toThrow(
      `server.http.staging_directory ${staging} is a symlink`,
    );
    await rm(staging);
    await mkdir(staging);
    await chmod(staging, 0o777);
    await expect(createUploadServer({ config, env: TOKEN_ENV })).rejects.toThrow(
      /staging_directory .* may be written by other users \(mode 777\)/,
    );
    await chmod(staging, 0o700);
    const server = await createUploadServer({ config, env: TOKEN_ENV });
    await server.close();
  });
});
