import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { BundleValidationError } from "@distributor/bundle";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createUploadClient,
  type RetryNotice,
  type RunRecord,
  RunWaitTimeoutError,
  type UploadClient,
  UploadError,
} from "../src/index.js";
import { WireServer } from "../src/testing/index.js";
import { sha256Of, TempDirs, writeBundle } from "./bundles.js";

const execFileAsync = promisify(execFile);
const TOKEN = "test-token";
const REPORT = "# Report\nSunny.\n";
/** Fast retries, so that only a server's Retry-After makes a test wait. */
const QUICK = { baseDelayMs: 5, maxDelayMs: 20 };

const dirs = new TempDirs();
let server: WireServer;
let client: UploadClient;

beforeEach(async () => {
  server = await WireServer.start({
    tokens: { [TOKEN]: ["reports"], "other-token": ["other"] },
    maxUploadBytes: 256 * 1024,
  });
  client = createUploadClient({ server: server.url, token: TOKEN, retry: QUICK });
});

afterEach(async () => {
  await server.close();
  await dirs.cleanup();
});

async function bundle(files: Record<string, string | Buffer> = { "report.md": REPORT }) {
  const dir = await dirs.make();
  const identity = await writeBundle(dir, files);
  return { dir, identity };
}

async function rejection(action: () => Promise<unknown>): Promise<Error> {
  try {
    await action();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected the operation to fail");
}

const uploadRequests = () => server.requests.filter((request) => request.method === "POST");

describe("upload", () => {
  it("streams the bundle and returns the accepted record", async () => {
    const data = randomBytes(40_000);
    const { dir, identity } = await bundle({
      "report.md": REPORT,
      "data/values.bin": data,
    });

    const accepted = await client.upload(dir, { pipeline: "reports" });

    expect(accepted).toEqual({
      run_id: "run-1",
      pipeline_id: "reports",
      status: "queued",
      manifest: identity,
      status_url: `${server.url}/runs/run-1`,
      replayed: false,
      idempotency_key: expect.stringMatching(/^[\x21-\x7e]{1,255}$/),
    });
    // What reached the server, read back out of the archive by the server.
    const [received] = server.uploads;
    expect(received?.status).toBe(202);
    expect(received?.headers["content-type"]).toBe("application/gzip");
    expect(received?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(received?.headers["idempotency-key"]).toBe(accepted.idempotency_key);
    // Streamed (chunked), not sent as one buffer with a length.
    expect(received?.headers["transfer-encoding"]).toBe("chunked");
    expect(received?.entries.map((entry) => [entry.path, entry.type, entry.sha256])).toEqual([
      ["data/", "Directory", sha256Of("")],
      ["data/values.bin", "File", sha256Of(data)],
      ["manifest.json", "File", expect.stringMatching(/^sha256:/)],
      ["report.md", "File", sha256Of(REPORT)],
    ]);
    for (const entry of received?.entries ?? []) {
      expect(entry.mode).toBe(entry.type === "Directory" ? 0o755 : 0o644);
      expect(entry.uname ?? "").toBe("");
    }
  });

  it("generates a fresh key for each upload", async () => {
    const { dir } = await bundle();

    const first = await client.upload(dir, { pipeline: "reports" });
    const second = await client.upload(dir, { pipeline: "reports" });

    expect(second.idempotency_key).not.toBe(first.idempotency_key);
    expect(second.run_id).not.toBe(first.run_id);
  });

  it("refuses an idempotency key the protocol does not allow, before any request", async () => {
    const { dir } = await bundle();

    for (const key of ["", "with space", "é", "k".repeat(256)]) {
      const error = await rejection(() =>
        client.upload(dir, { pipeline: "reports", idempotencyKey: key }),
      );
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toMatch(/idempotency key/);
    }
    expect(server.requests).toEqual([]);
  });

  // 401, 403, 404, 409, 413, 415 and 422 from the real server: packages/publish/test/server/client.test.ts.
  describe("refusals throw at once with the server's code and message", () => {
    for (const [status, code] of [
      [400, "invalid_idempotency_key"],
      [415, "unsupported_media_type"],
      [422, "bundle_invalid"],
    ] as const) {
      it(`${status} ${code} (injected)`, async () => {
        const { dir } = await bundle();
        const message = `report.md: refused by the server (${code})`;
        server.uploadFaults.push({ kind: "refuse", status, code, message });

        const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

        expect(error).toBeInstanceOf(UploadError);
        expect(error).toMatchObject({ status, code, serverMessage: message, attempts: 1 });
        expect(error.message).toContain(`${status} ${code}: ${message}`);
        expect(error.message).toContain(`${server.url}/pipelines/reports/uploads`);
        expect(uploadRequests()).toHaveLength(1);
      });
    }

    it("a refusal answered before a large body was read is not mistaken for a broken connection", async () => {
      const { dir } = await bundle({ "big.bin": randomBytes(4 * 1024 * 1024) });
      server.uploadFaults.push({
        kind: "refuse",
        status: 401,
        code: "unauthorized",
        message: "no",
      });

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toMatchObject({ status: 401, code: "unauthorized", attempts: 1 });
      expect(uploadRequests()).toHaveLength(1);
    });

    it("a 500 is not retried", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "refuse", status: 500, code: "internal", message: "boom" });

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toMatchObject({ status: 500, code: "internal", attempts: 1 });
      expect(uploadRequests()).toHaveLength(1);
    });

    it("an answer that is not the protocol's gets a client code", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "raw", status: 400, body: "<html>Bad Request</html>" });

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toMatchObject({ status: 400, code: "http_400", serverMessage: undefined });
    });

    it("a 202 whose body is not an accepted record is invalid_response", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({
        kind: "raw",
        status: 202,
        body: JSON.stringify({ run_id: "r", status: "done" }),
        contentType: "application/json",
      });

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toMatchObject({ status: 202, code: "invalid_response" });
      expect(error.message).toContain("pipeline_id is missing");
    });
  });

  describe("retries", () => {
    it("retries a 503 after its Retry-After with the same idempotency key, then succeeds", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "unavailable", retryAfter: "1" });
      const notices: RetryNotice[] = [];
      const started = Date.now();

      const accepted = await client.upload(dir, {
        pipeline: "reports",
        onRetry: (notice) => notices.push(notice),
      });

      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
      expect(accepted.status).toBe("queued");
      expect(notices).toHaveLength(1);
      expect(notices[0]?.delayMs).toBeGreaterThanOrEqual(1000);
      expect(notices[0]?.error).toMatchObject({
        status: 503,
        code: "queue_full",
        retryAfterMs: 1000,
      });
      const keys = uploadRequests().map((request) => request.headers["idempotency-key"]);
      expect(keys).toEqual([accepted.idempotency_key, accepted.idempotency_key]);
      // Both attempts sent the whole archive: the second was packed afresh.
      expect(server.uploads.map((upload) => upload.status)).toEqual([202]);
    });

    it("gives up on 503 after the attempt bound", async () => {
      const { dir } = await bundle();
      for (let i = 0; i < 5; i++) server.uploadFaults.push({ kind: "unavailable" });

      const error = await rejection(() =>
        client.upload(dir, { pipeline: "reports", retries: { attempts: 3 } }),
      );

      expect(error).toMatchObject({ status: 503, code: "queue_full", attempts: 3 });
      expect(error.message).toContain("gave up after 3 attempts");
      expect(uploadRequests()).toHaveLength(3);
    });

    it("does not wait for a Retry-After beyond the retry time limit", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "unavailable", retryAfter: "3600" });
      const started = Date.now();

      const error = await rejection(() =>
        client.upload(dir, { pipeline: "reports", retries: { maxElapsedMs: 5000 } }),
      );

      expect(Date.now() - started).toBeLessThan(2000);
      expect(error).toMatchObject({ status: 503, retryAfterMs: 3_600_000, attempts: 1 });
      expect(error.message).toContain("retry time limit of 5s");
    });

    it("retries reset connections and keeps the key", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "drop" }, { kind: "drop" });

      const accepted = await client.upload(dir, { pipeline: "reports" });

      expect(accepted.run_id).toBe("run-1");
      const keys = uploadRequests().map((request) => request.headers["idempotency-key"]);
      expect(keys).toEqual(Array(3).fill(accepted.idempotency_key));
    });

    it("a retry after an accepted upload whose answer was lost gets the original run", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "drop-after-accept" });

      const accepted = await client.upload(dir, { pipeline: "reports" });

      expect(accepted).toMatchObject({ run_id: "run-1", replayed: true });
      expect(server.uploads.map((upload) => upload.status)).toEqual([undefined, 200]);
    });

    it("fails clearly when the connection keeps breaking", async () => {
      const { dir } = await bundle();
      for (let i = 0; i < 5; i++) server.uploadFaults.push({ kind: "drop" });

      const error = await rejection(() => client.upload(dir, { pipeline: "reports", retries: 2 }));

      expect(error).toMatchObject({ code: "connection_failed", status: undefined, attempts: 3 });
      expect(error.message).toContain("cannot reach the server");
      expect(error.message).toContain("gave up after 3 attempts");
      expect(uploadRequests()).toHaveLength(3);
    });

    it("fails clearly when nothing listens, after the bound", async () => {
      const { dir } = await bundle();
      const closed = await closedPort();
      const offline = createUploadClient({ server: closed, token: TOKEN, retry: QUICK });

      const error = await rejection(() =>
        offline.upload(dir, { pipeline: "reports", retries: { attempts: 4 } }),
      );

      expect(error).toMatchObject({ code: "connection_failed", attempts: 4 });
      expect(error.message).toContain("ECONNREFUSED");
      expect(error.message).toContain(`${closed}/pipelines/reports/uploads`);
    });

    it("gives up on a server that accepts the connection and never answers, within its timeouts", async () => {
      const { dir } = await bundle();
      // Takes the connection, reads nothing, answers nothing.
      const silent = createServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const { port } = silent.address() as AddressInfo;
      try {
        const stalled = createUploadClient({
          server: `http://127.0.0.1:${port}`,
          token: TOKEN,
          retry: QUICK,
          timeouts: { connectMs: 300, requestMs: 300 },
        });
        const started = Date.now();
        const error = await rejection(() =>
          stalled.upload(dir, { pipeline: "reports", retries: { attempts: 2 } }),
        );
        expect(error).toMatchObject({ code: "timeout", attempts: 2 });
        expect(error.message).toContain("no answer within");
        const status = await rejection(() => stalled.getRun("r1", { retries: 0 }));
        expect(status).toMatchObject({ code: "timeout" });
        expect(Date.now() - started).toBeLessThan(5_000);
      } finally {
        silent.closeAllConnections();
        silent.close();
      }
    });

    it("stops retrying when aborted", async () => {
      const { dir } = await bundle();
      server.uploadFaults.push({ kind: "unavailable", retryAfter: "30" });
      const controller = new AbortController();
      const started = Date.now();

      const pending = rejection(() =>
        client.upload(dir, {
          pipeline: "reports",
          signal: controller.signal,
          onRetry: () => setTimeout(() => controller.abort(), 50),
        }),
      );

      expect((await pending).name).toBe("AbortError");
      expect(Date.now() - started).toBeLessThan(5000);
      expect(uploadRequests()).toHaveLength(1);
    });
  });

  describe("local validation", () => {
    it("refuses a bundle whose file does not match its manifest, before any request", async () => {
      const { dir } = await bundle();
      await writeFile(join(dir, "report.md"), "# Report\nRainy.\n");

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toBeInstanceOf(BundleValidationError);
      expect(error.message).toContain("report.md: sha256 mismatch");
      expect(server.requests).toEqual([]);
    });

    it("refuses an unlisted file unless told to ignore it", async () => {
      const { dir } = await bundle();
      await writeFile(join(dir, "stray.txt"), "left behind\n");

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));
      expect(error.message).toContain("stray.txt: present but not listed");
      expect(server.requests).toEqual([]);

      await client.upload(dir, { pipeline: "reports", validation: { unlistedFiles: "ignore" } });
      expect(server.uploads[0]?.entries.map((entry) => entry.path)).toContain("stray.txt");
    });

    it("sends manifest.json.sig beside the manifest, byte for byte", async () => {
      const { dir } = await bundle();
      const key = join(await dirs.make(), "producer");
      await execFileAsync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
      const manifest = join(dir, "manifest.json");
      await execFileAsync("ssh-keygen", ["-Y", "sign", "-f", key, "-n", "distributor", manifest]);
      const signature = await readFile(join(dir, "manifest.json.sig"));

      await client.upload(dir, { pipeline: "reports" });

      const sent = server.uploads[0]?.entries.find((entry) => entry.path === "manifest.json.sig");
      expect(sent?.sha256).toBe(sha256Of(signature));
    });

    it("refuses a directory without a manifest", async () => {
      const dir = await dirs.make();
      await writeFile(join(dir, "report.md"), REPORT);

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toBeInstanceOf(BundleValidationError);
      expect(server.requests).toEqual([]);
    });

    it("refuses a symlink in the bundle, naming it", async () => {
      const { dir } = await bundle();
      await symlink("report.md", join(dir, "alias.md"));

      const error = await rejection(() => client.upload(dir, { pipeline: "reports" }));

      expect(error).toBeInstanceOf(BundleValidationError);
      expect(error.message).toContain("alias.md: is a symlink");
      expect(server.requests).toEqual([]);
    });
  });
});

describe("getRun", () => {
  it("retries a 503", async () => {
    const { dir } = await bundle();
    const { run_id } = await client.upload(dir, { pipeline: "reports" });
    server.runFaults.push({ kind: "unavailable", retryAfter: "0" });

    expect((await client.getRun(run_id)).status).toBe("queued");
  });
});

describe("waitForRun", () => {
  async function accepted(): Promise<string> {
    const { dir } = await bundle();
    return (await client.upload(dir, { pipeline: "reports" })).run_id;
  }

  it("follows queued and running to succeeded", async () => {
    server.runStatuses = ["queued", "queued", "running", "running", "succeeded"];
    const runId = await accepted();
    const seen: string[] = [];

    const record = await client.waitForRun(runId, {
      pollIntervalMs: 5,
      onStatus: (r) => seen.push(r.status),
    });

    expect(seen).toEqual(["queued", "queued", "running", "running", "succeeded"]);
    expect(record).toMatchObject({ status: "succeeded", error: null });
    expect(record.finished_at).not.toBeNull();
  });

  it("backs off between polls up to the longest interval", async () => {
    server.runStatuses = ["queued", "running", "running", "running", "running", "succeeded"];
    const runId = await accepted();

    await client.waitForRun(runId, { pollIntervalMs: 40, maxPollIntervalMs: 100 });

    const times = server.requests.filter((r) => r.method === "GET").map((r) => r.at);
    const gaps = times.slice(1).map((time, i) => time - (times[i] as number));
    // 40, 60, 90, then capped at 100 (timers fire late, never early).
    const planned = [40, 60, 90, 100, 100];
    expect(gaps).toHaveLength(planned.length);
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual((planned[i] as number) - 5);
      expect(gap).toBeLessThan((planned[i] as number) + 200);
    });
  });

  it("resolves with a failed run", async () => {
    server.runStatuses = ["running", "failed"];
    const runId = await accepted();

    const record: RunRecord = await client.waitForRun(runId, { pollIntervalMs: 5 });

    expect(record.status).toBe("failed");
    expect(record.error).toEqual({ code: "publish_failed", message: "destination archive failed" });
  });

  it("rides out an unavailable server and a dropped connection while polling", async () => {
    server.runStatuses = ["running", "succeeded"];
    const runId = await accepted();
    server.runFaults.push({ kind: "unavailable", retryAfter: "0" }, { kind: "drop" });

    const record = await client.waitForRun(runId, { pollIntervalMs: 5 });

    expect(record.status).toBe("succeeded");
    expect(server.requests.filter((request) => request.method === "GET")).toHaveLength(4);
  });

  it("gives up after its timeout with the last status", async () => {
    server.runStatuses = ["running"];
    const runId = await accepted();
    const started = Date.now();

    const error = await rejection(() =>
      client.waitForRun(runId, { timeoutMs: 300, pollIntervalMs: 20 }),
    );

    expect(error).toBeInstanceOf(RunWaitTimeoutError);
    expect(error).toMatchObject({ code: "wait_timeout", runId, timeoutMs: 300 });
    expect((error as RunWaitTimeoutError).lastRecord?.status).toBe("running");
    expect(error.message).toBe(`run ${runId} did not finish within 300ms (last status: running)`);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2000);
  });

  it("stops when aborted", async () => {
    server.runStatuses = ["running"];
    const runId = await accepted();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);

    const error = await rejection(() =>
      client.waitForRun(runId, { signal: controller.signal, pollIntervalMs: 20 }),
    );

    expect(error.name).toBe("AbortError");
  });

  it("a run the server does not know fails at once", async () => {
    const error = await rejection(() => client.waitForRun("run-404", { pollIntervalMs: 5 }));

    expect(error).toMatchObject({ status: 404, code: "run_not_found" });
  });
});

describe("createUploadClient", () => {
  it("keeps a path prefix of the server URL", async () => {
    const prefixed = createUploadClient({ server: `${server.url}/distributor`, token: TOKEN });

    expect(prefixed.server.href).toBe(`${server.url}/distributor/`);
    await rejection(() => prefixed.getRun("run-1"));
    expect(server.requests.at(-1)?.url).toBe("/distributor/runs/run-1");
  });

  it("refuses a server that is no http URL and an empty token", () => {
    expect(() => createUploadClient({ server: "ftp://host", token: TOKEN })).toThrow(/http/);
    expect(() => createUploadClient({ server: "localhost:8080/x", token: TOKEN })).toThrow(/http/);
    expect(() => createUploadClient({ server: server.url, token: "" })).toThrow(/token/);
  });

  it("uses the fetch it is given", async () => {
    const seen: string[] = [];
    const traced = createUploadClient({
      server: server.url,
      token: TOKEN,
      fetch: (input, init) => {
        seen.push(`${init?.method} ${String(input)}`);
        return fetch(input, init);
      },
    });
    const { dir } = await bundle();

    const { run_id } = await traced.upload(dir, { pipeline: "reports" });
    await traced.getRun(run_id);

    expect(seen).toEqual([
      `POST ${server.url}/pipelines/reports/uploads`,
      `GET ${server.url}/runs/run-1`,
    ]);
  });
});

/** A URL on which nothing listens: a port that was just bound and released. */
async function closedPort(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
