import { randomBytes } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Config, parseConfig } from "@distributor/publish";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { chunkName, maxPieces } from "../src/resumable/chunks.js";
import {
  bundleArchive,
  createTus,
  errorCode,
  headTus,
  patchTus,
  type Running,
  startServer,
  TOKEN_ENV,
  waitForRun,
  workspace,
} from "../src/testing/index.js";

// Completing a resumable upload while its staging store fails underneath: S3 staging's layout over
// a local directory whose backend fails on cue (a GET reset, a PUT that never lands), behind the
// real HTTP server on 127.0.0.1:0.

let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running[] = [];

/** What the staging backend does wrong next. */
interface Faults {
  /** Fails reads of chunk objects once this many have been read. */
  failChunkReadsAfter?: number;
  chunkReads: number;
  /** Fails this many writes of `accepted.json`. */
  failAcceptedWrites: number;
}
let faults: Faults;

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
  faults = { chunkReads: 0, failAcceptedWrites: 0 };
});
afterEach(async () => {
  for (const { server } of running) await server.close();
  running = [];
  await removeWorkspace();
});

function faulty(backend: StorageBackend): StorageBackend {
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const method = (value as (...a: unknown[]) => unknown).bind(target);
      if (property === "readFile") {
        return async (path: string, ...rest: unknown[]) => {
          if (path.includes("/chunk-")) {
            faults.chunkReads += 1;
            const after = faults.failChunkReadsAfter;
            if (after !== undefined && faults.chunkReads > after) {
              throw new Error(`GET ${path}: connection reset`);
            }
          }
          return method(path, ...rest);
        };
      }
      if (property === "writeFile") {
        return async (path: string, ...rest: unknown[]) => {
          if (path.endsWith("/accepted.json") && faults.failAcceptedWrites > 0) {
            faults.failAcceptedWrites -= 1;
            throw new Error(`PUT ${path}: timed out`);
          }
          return method(path, ...rest);
        };
      }
      return method;
    },
  }) as StorageBackend;
}

function config(): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "receive")}
  staging:
    backend: s3
    bucket: staging
    prefix: uploads
    endpoint: "http://127.0.0.1:9"
    force_path_style: true
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
  - {id: other, token_env: OTHER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 1MiB}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
`,
    { sourceName: "completion.yml" },
  );
}

async function serve(): Promise<string> {
  const bucket = join(root, "bucket");
  const backends = { s3: async () => faulty(createLocalBackend({ root: bucket })) };
  const started = await startServer(config(), { backends, env: TOKEN_ENV });
  running.push(started);
  return started.url;
}

async function archive() {
  const data = randomBytes(200 * 1024).toString("base64");
  return bundleArchive(root, "reports.completion", { "report.md": "# Report\n", "data.txt": data });
}

describe("completing a resumable upload on a failing staging store", () => {
  it("answers 503 with Retry-After when its bytes cannot be read back, and keeps the partial", async () => {
    const url = await serve();
    const body = await archive();
    const created = await createTus(url, body, { key: "unreadable" });
    const location = created.headers.get("location") as string;
    const half = Math.floor(body.length / 2);
    expect((await patchTus(url, location, 0, body.subarray(0, half))).status).toBe(204);
    // The checksum pass reads both chunks; the archive's own read then hits a reset.
    faults.failChunkReadsAfter = faults.chunkReads + 2;
    const last = await patchTus(url, location, half, body.subarray(half));
    expect([last.status, await errorCode(last)]).toEqual([503, "partial_unreadable"]);
    expect(last.headers.get("retry-after")).toMatch(/^\d+$/);
    const probed = await headTus(url, location);
    expect([probed.status, probed.headers.get("upload-offset")]).toEqual([
      200,
      String(body.length),
    ]);
    faults.failChunkReadsAfter = undefined;
    const again = await patchTus(url, location, body.length, Buffer.alloc(0));
    expect(again.status).toBe(202);
    const { run_id } = (await again.json()) as { run_id: string };
    expect(await waitForRun(url, run_id)).toMatchObject({ status: "succeeded" });
  });

  it("answers a key-less upload's repeated completion as a replay of its acceptance", async () => {
    const url = await serve();
    const body = await archive();
    const created = await createTus(url, body);
    const location = created.headers.get("location") as string;
    // Accepted and queued, but the record of it in the partial never landed.
    faults.failAcceptedWrites = 1;
    const first = await patchTus(url, location, 0, body);
    expect(first.status).toBeGreaterThanOrEqual(500);
    const again = await patchTus(url, location, body.length, Buffer.alloc(0));
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    const { run_id } = (await again.json()) as { run_id: string };
    expect(await waitForRun(url, run_id)).toMatchObject({ status: "succeeded" });
    // One run, one staged bundle: nothing else was accepted.
    const runs = (await (
      await fetch(`${url}/runs?pipeline=reports`, {
        headers: { Authorization: `Bearer ${TOKEN_ENV.REPORTER_TOKEN}` },
      })
    ).json()) as { runs: { run_id: string }[] };
    expect(runs.runs.map((run) => run.run_id)).toEqual([run_id]);
    expect(
      (await readdir(join(root, "bucket"))).filter((n) => n.startsWith("partial-")),
    ).toHaveLength(1);
  });
});

describe("the pieces of a partial on S3 staging", () => {
  it("refuses a PATCH once the partial is stored in as many chunks as its length allows", async () => {
    const url = await serve();
    const body = await archive();
    const created = await createTus(url, body, { key: "fragmented" });
    const location = created.headers.get("location") as string;
    const directory = join(root, "bucket", `partial-${location.split("/").pop()}`);
    const { incarnation } = JSON.parse(await readFile(join(directory, "info.json"), "utf8"));
    // A producer that sent one byte per PATCH, over and over.
    const pieces = maxPieces(body.length);
    for (let at = 0; at < pieces; at++) {
      await writeFile(
        join(directory, chunkName(at, 1, incarnation, "p")),
        body.subarray(at, at + 1),
      );
    }
    expect((await headTus(url, location)).headers.get("upload-offset")).toBe(String(pieces));
    const refused = await patchTus(url, location, pieces, body.subarray(pieces));
    expect([refused.status, await errorCode(refused)]).toEqual([413, "upload_too_fragmented"]);
    expect((await headTus(url, location)).headers.get("upload-offset")).toBe(String(pieces));
  });
});
