import type { StorageBackend } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createS3Backend,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type S3BackendOptions,
} from "../src/index.js";
import { startSilentServer, startUnacceptingPort } from "./fault-proxy.js";

const TIMEOUT_MS = 500;
/** Generous: the assertion is that the call ends, not how fast; the suite's limit is 60 s. */
const ENDS_WITHIN_MS = 5 * TIMEOUT_MS;

function backendAt(endpoint: string, extra: Partial<S3BackendOptions> = {}): StorageBackend {
  return createS3Backend({
    bucket: "hung",
    prefix: "site",
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: "KEY", secretAccessKey: "SECRET" },
    maxAttempts: 1,
    ...extra,
  });
}

async function timed<T>(call: () => Promise<T>): Promise<{ result: Promise<T>; ms: number }> {
  const started = Date.now();
  const result = call();
  await result.catch(() => undefined);
  return { result, ms: Date.now() - started };
}

describe("s3 backend against a service that accepts connections and never answers", () => {
  let silent: Awaited<ReturnType<typeof startSilentServer>>;
  beforeAll(async () => {
    silent = await startSilentServer();
  });
  afterAll(async () => {
    await silent?.close();
  });

  it("exports its default timeouts", () => {
    expect(DEFAULT_CONNECT_TIMEOUT_MS).toBe(10_000);
    expect(DEFAULT_REQUEST_TIMEOUT_MS).toBe(30_000);
  });

  it("does not try a timed-out request again: a hung read fails within one timeout", async () => {
    // The default three attempts: each would wait TIMEOUT_MS again (and back off between).
    const backend = backendAt(silent.endpoint, { requestTimeoutMs: TIMEOUT_MS, maxAttempts: 3 });
    try {
      const { result, ms } = await timed(() => backend.readFile("index.html"));
      await expectStorageError(result, "unavailable");
      await expect(result).rejects.toThrow(/timed out.*\(timeouts\.request/);
      expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(ms).toBeLessThan(2 * TIMEOUT_MS);
    } finally {
      await backend.close();
    }
  });

  it("refuses a timeout that would mean waiting forever", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 1.5]) {
      expect(() => backendAt(silent.endpoint, { requestTimeoutMs: bad })).toThrow(RangeError);
      expect(() => backendAt(silent.endpoint, { connectTimeoutMs: bad })).toThrow(RangeError);
    }
  });

  it("fails writes, reads and walks with unavailable once timeouts.request passes", async () => {
    const backend = backendAt(silent.endpoint, { requestTimeoutMs: TIMEOUT_MS });
    try {
      const calls: [string, string, () => Promise<unknown>][] = [
        // A no-clobber create: the conditional-write probe is the request that hangs.
        ["write file", "out/report.md", () => backend.writeFile("out/report.md", "x")],
        // An overwrite: the PUT hangs, and so does the HEAD that looks for a lost answer.
        [
          "write file",
          "out/page.html",
          () => backend.writeFile("out/page.html", "x", { overwrite: true }),
        ],
        ["read file", "out/report.md", () => backend.readFile("out/report.md")],
        ["walk", "out", () => backend.walk("out", { recursive: true, limit: 10 })],
      ];
      for (const [operation, path, call] of calls) {
        const { result, ms } = await timed(call);
        const error = await expectStorageError(result, "unavailable");
        expect(error.message).toContain(`${operation} s3:${path}: `);
        expect(error.message).toContain(`request for s3://hung/site/${path} timed out`);
        expect(error.message).toContain(`within ${TIMEOUT_MS} ms (timeouts.request`);
        // The overwrite waits twice (PUT, then HEAD).
        expect(ms, operation).toBeLessThan(2 * ENDS_WITHIN_MS);
      }
    } finally {
      await backend.close();
    }
  });

  it("bounds a call that retries, each attempt timing out", async () => {
    const backend = backendAt(silent.endpoint, { requestTimeoutMs: TIMEOUT_MS, maxAttempts: 3 });
    try {
      const { result, ms } = await timed(() => backend.stat("out/report.md"));
      const error = await expectStorageError(result, "unavailable");
      expect(error.message).toContain("timed out");
      expect(ms).toBeLessThan(3 * ENDS_WITHIN_MS);
    } finally {
      await backend.close();
    }
  });

  it("stops waiting for an answer when the caller's signal fires", async () => {
    // No timeout would end these calls within the test: only the signal can.
    const backend = backendAt(silent.endpoint, { requestTimeoutMs: 600_000 });
    try {
      const calls: ((signal: AbortSignal) => Promise<unknown>)[] = [
        (signal) => backend.readFile("out/report.md", { signal }),
        (signal) => backend.writeFile("out/report.md", "x", { overwrite: true, signal }),
        (signal) => backend.walk("out", { limit: 10, signal }),
      ];
      for (const call of calls) {
        const controller = new AbortController();
        const reason = new Error("interrupted");
        setTimeout(() => controller.abort(reason), 200);
        const { result, ms } = await timed(() => call(controller.signal));
        await expect(result).rejects.toBe(reason);
        expect(ms).toBeLessThan(ENDS_WITHIN_MS);
      }
    } finally {
      await backend.close();
    }
  });
});

describe("s3 backend against a port whose connections never complete", () => {
  let port: Awaited<ReturnType<typeof startUnacceptingPort>>;
  beforeAll(async () => {
    port = await startUnacceptingPort();
  });
  afterAll(async () => {
    await port?.close();
  });

  it("fails with unavailable once timeouts.connect passes", async () => {
    const backend = backendAt(port.endpoint, {
      connectTimeoutMs: TIMEOUT_MS,
      requestTimeoutMs: 600_000,
    });
    try {
      const { result, ms } = await timed(() => backend.stat("out/report.md"));
      const error = await expectStorageError(result, "unavailable");
      expect(error.message).toContain("stat s3:out/report.md: ");
      expect(error.message).toContain(
        `request for s3://hung/site/out/report.md timed out: no connection to the service within ${TIMEOUT_MS} ms (timeouts.connect`,
      );
      expect(ms).toBeLessThan(ENDS_WITHIN_MS);
    } finally {
      await backend.close();
    }
  });
});
