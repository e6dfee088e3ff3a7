import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { type Config, parseConfig } from "@distributor/publish";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createTus as create,
  errorCode,
  headTus as head,
  patchTus as patch,
} from "../src/testing/index.js";
import {
  bundleArchive,
  OTHER_TOKEN,
  type Running,
  startServer,
  TOKEN,
  TOKEN_ENV,
  waitForRun,
  workspace,
} from "./helpers.js";

// Resumable (tus 1.0) uploads of docs/integrations/http-upload.md over real HTTP on 127.0.0.1:0,
// with real staging and destination directories.

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

function config(uploads = ""): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "staging")}
${uploads}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
  - {id: other, token_env: OTHER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 1MiB}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
`,
    { sourceName: "test.yml" },
  );
}

async function serve(uploads = "") {
  const started = await startServer(config(uploads), { env: TOKEN_ENV });
  running.push(started);
  return started.url;
}

/** A valid gzip bundle of a few hundred KiB that does not compress (random bytes, base64). */
async function archive(id = "reports.resumable") {
  const data = randomBytes(300 * 1024).toString("base64");
  const body = await bundleArchive(root, id, { "report.md": "# Report\n", "data.txt": data });
  dataOf.set(body, data);
  return body;
}

/** The random file each archive carries, to compare with what was published. */
const dataOf = new WeakMap<Buffer, string>();

async function created(url: string, body: Buffer, key = "resumable-key") {
  const response = await create(url, body, { key });
  expect(response.status).toBe(201);
  const location = response.headers.get("location");
  expect(location).toMatch(/^\/pipelines\/reports\/uploads\/[A-Za-z0-9_-]+$/);
  return location as string;
}

/** The published file equals the bundle's: the run read exactly the archive sent. */
async function expectPublished(url: string, answer: Response, body: Buffer) {
  expect(answer.status).toBe(202);
  const accepted = (await answer.json()) as { run_id: string };
  const run = await waitForRun(url, accepted.run_id);
  expect(run.status).toBe("succeeded");
  const published = await readFile(join(root, "site", "data.txt"), "utf8");
  expect(published).toBe(dataOf.get(body));
  return accepted;
}

describe("resumable uploads (tus 1.0)", () => {
  it("answers OPTIONS with the version and extensions it speaks", async () => {
    const url = await serve();
    const response = await fetch(`${url}/pipelines/reports/uploads`, { method: "OPTIONS" });
    expect(response.status).toBe(204);
    expect(response.headers.get("tus-version")).toBe("1.0.0");
    expect(response.headers.get("tus-extension")).toBe("creation,expiration,termination,checksum");
  });

  it("creates, appends in pieces, reports the durable offset and accepts the whole", async () => {
    const url = await serve();
    const body = await archive();
    const location = await created(url, body);
    const third = Math.floor(body.length / 3);
    const first = await patch(url, location, 0, body.subarray(0, third));
    expect(first.status).toBe(204);
    expect(first.headers.get("upload-offset")).toBe(String(third));
    expect(first.headers.get("upload-expires")).toMatch(/GMT$/);
    const probed = await head(url, location);
    expect(probed.status).toBe(200);
    expect(probed.headers.get("upload-offset")).toBe(String(third));
    expect(probed.headers.get("upload-length")).toBe(String(body.length));
    // What HEAD reported is on disk.
    const id = location.split("/").pop();
    expect((await stat(join(root, "staging", `partial-${id}`, "data"))).size).toBe(third);
    const second = await patch(url, location, third, body.subarray(third, 2 * third));
    expect(second.status).toBe(204);
    const last = await patch(url, location, 2 * third, body.subarray(2 * third));
    const accepted = await expectPublished(url, last, body);
    expect(last.headers.get("upload-offset")).toBe(String(body.length));
    // The acceptance is recorded with the partial (its bytes go a grace later, with the sweeper);
    // a repeated last PATCH replays it.
    expect(await readdir(join(root, "staging", `partial-${id}`))).toContain("accepted.json");
    const again = await patch(url, location, body.length, Buffer.alloc(0));
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(((await again.json()) as { run_id: string }).run_id).toBe(accepted.run_id);
  });

  it("finds the same partial again for the same idempotency key (a producer that restarted)", async () => {
    const url = await serve();
    const body = await archive();
    const location = await created(url, body, "restart-key");
    expect((await patch(url, location, 0, body.subarray(0, 1000))).status).toBe(204);
    const again = await create(url, body, { key: "restart-key" });
    expect(again.status).toBe(201);
    expect(again.headers.get("location")).toBe(location);
    expect(again.headers.get("upload-offset")).toBe("1000");
    // Another archive under the key is refused; nothing of the first is lost.
    const other = await archive("reports.other");
    const conflict = await create(url, other, { key: "restart-key" });
    expect(conflict.status).toBe(409);
    expect(await errorCode(conflict)).toBe("idempotency_conflict");
    expect((await head(url, location)).headers.get("upload-offset")).toBe("1000");
    await expectPublished(url, await patch(url, location, 1000, body.subarray(1000)), body);
  });

  it("refuses hostile PATCHes with clear codes and keeps what it held", async () => {
    const url = await serve();
    const body = await archive();
    const location = await created(url, body);
    expect((await patch(url, location, 0, body.subarray(0, 4096))).status).toBe(204);
    const heldNow = async () => (await head(url, location)).headers.get("upload-offset");

    const skip = await patch(url, location, 8192, body.subarray(8192, 9000));
    expect([skip.status, await errorCode(skip)]).toEqual([409, "offset_mismatch"]);
    expect(skip.headers.get("upload-offset")).toBe("4096");
    const overlap = await patch(url, location, 1000, body.subarray(1000, 9000));
    expect([overlap.status, await errorCode(overlap)]).toEqual([409, "offset_mismatch"]);

    const past = await patch(
      url,
      location,
      4096,
      Buffer.concat([body.subarray(4096), Buffer.alloc(10)]),
    );
    expect([past.status, await errorCode(past)]).toEqual([413, "upload_past_length"]);

    const badChecksum = await patch(url, location, 4096, body.subarray(4096, 8192), {
      "Upload-Checksum": `sha1 ${createHash("sha1").update("something else").digest("base64")}`,
    });
    expect([badChecksum.status, await errorCode(badChecksum)]).toEqual([460, "checksum_mismatch"]);

    const wrongType = await fetch(new URL(location, url), {
      method: "PATCH",
      headers: {
        Authorization: `Bearer ${TOKEN}`,
        "Tus-Resumable": "1.0.0",
        "Content-Type": "application/json",
        "Upload-Offset": "4096",
      },
      body: "{}",
    });
    expect([wrongType.status, await errorCode(wrongType)]).toEqual([415, "unsupported_media_type"]);
    const noVersion = await fetch(new URL(location, url), {
      method: "HEAD",
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    expect(noVersion.status).toBe(412);

    const foreign = await patch(url, location, 4096, body.subarray(4096, 8192), {}, OTHER_TOKEN);
    expect([foreign.status, await errorCode(foreign)]).toEqual([403, "upload_not_owned"]);
    expect((await head(url, location, OTHER_TOKEN)).status).toBe(403);
    expect(await heldNow()).toBe("4096");
    const data = await readFile(
      join(root, "staging", `partial-${location.split("/").pop()}`, "data"),
    );
    expect(data.equals(body.subarray(0, 4096))).toBe(true);

    // A checksum that matches is taken; the upload then completes to the bundle's bytes.
    const good = await patch(url, location, 4096, body.subarray(4096, 8192), {
      "Upload-Checksum": `sha256 ${createHash("sha256").update(body.subarray(4096, 8192)).digest("base64")}`,
    });
    expect(good.status).toBe(204);
    await expectPublished(url, await patch(url, location, 8192, body.subarray(8192)), body);
  });

  it("terminates an upload: its bytes go, and a body sent after is refused", async () => {
    const url = await serve();
    const body = await archive();
    const location = await created(url, body);
    expect((await patch(url, location, 0, body.subarray(0, 2048))).status).toBe(204);
    const foreign = await fetch(new URL(location, url), {
      method: "DELETE",
      headers: { Authorization: `Bearer ${OTHER_TOKEN}`, "Tus-Resumable": "1.0.0" },
    });
    expect(foreign.status).toBe(403);
    const terminated = await fetch(new URL(location, url), {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKEN}`, "Tus-Resumable": "1.0.0" },
    });
    expect(terminated.status).toBe(204);
    expect((await readdir(join(root, "staging"))).filter((n) => n.startsWith("partial-"))).toEqual(
      [],
    );
    const after = await patch(url, location, 2048, body.subarray(2048));
    expect([after.status, await errorCode(after)]).toEqual([404, "upload_not_found"]);
  });

  it("refuses a declared length over max_upload_size, and more partials than a token may hold", async () => {
    const url = await serve("  uploads: {max_partials_per_token: 2}");
    const body = await archive();
    const tooLarge = await create(url, body, { length: 2 * 1024 * 1024 });
    expect([tooLarge.status, await errorCode(tooLarge)]).toEqual([413, "upload_too_large"]);
    expect((await create(url, body, { key: "a" })).status).toBe(201);
    expect((await create(url, body, { key: "b" })).status).toBe(201);
    const third = await create(url, body, { key: "c" });
    expect([third.status, await errorCode(third)]).toEqual([429, "too_many_partial_uploads"]);
    // Another token's partials are its own.
    expect((await create(url, body, { key: "a", token: OTHER_TOKEN })).status).toBe(201);
  });

  it("expires a partial: bytes gone from staging and metrics, a resume told 410, a new creation starts over", async () => {
    const url = await serve("  uploads: {partial_ttl: 1s}");
    const body = await archive();
    const location = await created(url, body, "expiring");
    expect((await patch(url, location, 0, body.subarray(0, 5000))).status).toBe(204);
    const metrics = async () =>
      (await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
    expect(await metrics()).toMatch(/^distributor_partial_uploads 1$/m);
    expect(await metrics()).toMatch(/^distributor_partial_upload_bytes 5000$/m);
    const directory = join(root, "staging", `partial-${location.split("/").pop()}`);
    // The sweeper runs every second; the partial's last bytes are a second old after a second.
    const deadline = Date.now() + 10_000;
    while (
      (await readdir(directory).catch(() => [] as string[])).includes("data") &&
      Date.now() < deadline
    )
      await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await readdir(directory).catch(() => [] as string[])).not.toContain("data");
    const text = await metrics();
    expect(text).toMatch(/^distributor_partial_uploads 0$/m);
    expect(text).toMatch(/^distributor_partial_upload_bytes 0$/m);
    expect(text).toMatch(/^distributor_partial_upload_expirations_total 1$/m);
    const late = await patch(url, location, 5000, body.subarray(5000));
    expect([late.status, await errorCode(late)]).toEqual([410, "upload_expired"]);
    const fresh = await create(url, body, { key: "expiring" });
    expect(fresh.status).toBe(201);
    expect(fresh.headers.get("upload-offset")).toBe("0");
  });

  it("removes a completed archive whose sha256 differs from the one declared", async () => {
    const url = await serve();
    const body = await archive();
    const response = await create(url, body, { key: "digest", digest: "0".repeat(64) });
    const location = response.headers.get("location") as string;
    const last = await patch(url, location, 0, body);
    expect([last.status, await errorCode(last)]).toEqual([460, "checksum_mismatch"]);
    expect((await head(url, location)).status).toBe(404);
  });
});
