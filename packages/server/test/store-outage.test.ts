import type { UploadStore } from "@distributor/upload-store";
import { UploadStoreError } from "@distributor/upload-store";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { READINESS_TIMEOUT_MS } from "../src/readiness.js";
import { createMemoryUploadStore } from "../src/store/memory-store.js";
import {
  bundleArchive,
  getJson,
  type Running,
  startServer,
  TOKEN,
  tree,
  upload,
  uploadConfig,
  waitForRun,
  workspace,
} from "./helpers.js";

// A store that cannot be reached for now is a 503 with Retry-After that a producer retries; a
// store that fails otherwise is a 500. The fault is injected around a real memory store, over
// the real HTTP server. The same over a real PostgreSQL and real processes:
// packages/cli/test/serve-instances.test.ts.

const REPORT = "# Report\nSunny.\n";

let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running | undefined;
/** Sets the store back to working before the server closes, which reads the store's queue. */
let heal: (() => void) | undefined;

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
});
afterEach(async () => {
  heal?.();
  await running?.server.close();
  running = undefined;
  await removeWorkspace();
});

type Fault = "none" | "unavailable" | "failed" | "hanging";

/**
 * A memory store whose every call throws, while `fault` says so, what a broken store throws;
 * `awayFor` makes only the calls of the methods it names unavailable.
 */
function faultyStore(): {
  store: UploadStore;
  set(fault: Fault): void;
  awayFor(methods: (keyof UploadStore)[]): void;
} {
  const inner = createMemoryUploadStore({ queueSize: 8, retentionMs: 60_000, maxRuns: 100 });
  let fault: Fault = "none";
  let away = new Set<string | symbol>();
  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || property === "close") return value;
      return (...args: unknown[]) => {
        if (fault === "unavailable" || away.has(property)) {
          return Promise.reject(
            new UploadStoreError(
              "store_unavailable",
              `upload store (test): ${String(property)}: connect ECONNREFUSED 127.0.0.1:5432`,
            ),
          );
        }
        // A database that accepts the connection and never answers.
        if (fault === "hanging") return new Promise(() => undefined);
        if (fault === "failed") {
          return Promise.reject(
            new UploadStoreError(
              "store_failed",
              `upload store (test): ${String(property)}: relation "upload_runs" does not exist`,
            ),
          );
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  heal = () => {
    fault = "none";
    away = new Set();
  };
  return {
    store,
    set: (next) => {
      fault = next;
    },
    awayFor: (methods) => {
      away = new Set(methods);
    },
  };
}

describe("a store that fails under serve", () => {
  it("answers 503 store_unavailable with Retry-After while the store is away, then accepts the retry", async () => {
    const { store, set, awayFor } = faultyStore();
    const config = uploadConfig(root);
    running = await startServer(config, { store });
    const { url, events } = running;
    const body = await bundleArchive(root, "reports.outage", { "report.md": REPORT });

    set("unavailable");
    const refused = await upload(url, body, { key: "build-1" });
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect(refused.json).toEqual({
      error: {
        code: "store_unavailable",
        message: expect.stringContaining("ECONNREFUSED 127.0.0.1:5432"),
      },
    });
    const status = await getJson(url, "/runs/run-1");
    expect(status.status).toBe(503);
    expect(status.json).toMatchObject({ error: { code: "store_unavailable" } });

    // The store goes away between staging and recording the run: whether the run was committed
    // is unknown, so its staged bundle stays; what else the upload held could not be given back
    // either, which is logged, and the answer is the same 503.
    set("none");
    awayFor(["enqueue", "releaseKey"]);
    const lost = await upload(url, body, { key: "build-1" });
    expect(lost.status).toBe(503);
    expect(lost.json).toMatchObject({ error: { code: "store_unavailable" } });
    expect(await tree(config.server.http.stagingDirectory)).toContainEqual(
      expect.stringMatching(/^upload-[^/]+\/manifest\.json$/),
    );
    expect(events).toContainEqual(
      expect.objectContaining({
        type: "warning",
        message: expect.stringContaining("refused upload: releasing the idempotency key:"),
      }),
    );

    // (The injected fault kept the key from being released; a store that comes back releases it,
    // as the PostgreSQL store's outage test shows, so the retry here carries a key of its own.)
    awayFor([]);
    const retried = await upload(url, body, { key: "build-1-again" });
    expect(retried.status).toBe(202);
    expect((await waitForRun(url, retried.json.run_id as string)).status).toBe("succeeded");
  });

  it("answers 500 internal_error, without Retry-After, when the store fails otherwise", async () => {
    const { store, set } = faultyStore();
    running = await startServer(uploadConfig(root), { store });
    const body = await bundleArchive(root, "reports.broken", { "report.md": REPORT });
    set("failed");
    const refused = await upload(running.url, body, { key: "build-2" });
    expect(refused.status).toBe(500);
    expect(refused.headers.get("retry-after")).toBeNull();
    expect(refused.json).toEqual({
      error: {
        code: "internal_error",
        message: expect.stringContaining('relation "upload_runs" does not exist'),
      },
    });
  });
});

describe("health and readiness while the store fails", () => {
  it("keeps /healthz and /metrics at 200 and says in /readyz what is wrong with the store", async () => {
    const { store, set } = faultyStore();
    running = await startServer(uploadConfig(root), { store });
    const { url } = running;

    set("unavailable");
    const health = await getJson(url, "/healthz", null);
    expect(health).toMatchObject({ status: 200, json: { ok: true } });
    expect(
      (await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(200);
    const notReady = await fetch(`${url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({
      ready: false,
      checks: {
        store: expect.stringMatching(
          /^the store does not answer: .*ECONNREFUSED 127\.0\.0\.1:5432$/,
        ),
        staging: "ok",
      },
    });

    set("none");
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, checks: { store: "ok", staging: "ok" } });
  });

  it("answers /readyz within its time limit when the store does not answer at all", async () => {
    const { store, set } = faultyStore();
    running = await startServer(uploadConfig(root), { store });
    set("hanging");
    const started = Date.now();
    const notReady = await fetch(`${running.url}/readyz`);
    expect(Date.now() - started).toBeLessThan(READINESS_TIMEOUT_MS + 1_000);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({
      ready: false,
      checks: { store: "the store did not answer within 2s", staging: "ok" },
    });
    expect((await getJson(running.url, "/healthz", null)).status).toBe(200);
  });
});
