import { rm } from "node:fs/promises";
import { parseConfig } from "@distributor/publish";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventLevel } from "../src/server.js";
import {
  bundleArchive,
  type Running,
  startServer,
  TOKEN,
  upload,
  uploadConfig,
  waitForRun,
  workspace,
} from "./helpers.js";

// Running serve in production (docs/integrations/http-upload.md): Prometheus metrics, readiness, a level on every log
// event and one event per state change of a run — over real HTTP with the embedded store.

const REPORT = "# Report\nSunny.\n";
const REPLAYED = 'distributor_uploads_total{pipeline="reports",outcome="replayed"}';

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

async function serve(config = uploadConfig(root)): Promise<Running> {
  const started = await startServer(config);
  running.push(started);
  return started;
}

async function scrape(url: string, token: string | null = TOKEN) {
  const response = await fetch(`${url}/metrics`, {
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  });
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    text: await response.text(),
  };
}

/** The value of one sample line (`name{labels} value`), or undefined. */
function sample(text: string, line: string): number | undefined {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe("GET /metrics", () => {
  it("counts uploads, runs, bytes and durations by pipeline, in the Prometheus text format", async () => {
    const { url } = await serve();
    const body = await bundleArchive(root, "reports.metrics", { "report.md": REPORT });
    const accepted = await upload(url, body, { key: "k1" });
    expect(accepted.status).toBe(202);
    await waitForRun(url, accepted.json.run_id as string);
    const replayed = await upload(url, body, { key: "k1" });
    expect(replayed.headers.get("idempotency-replayed")).toBe("true");
    expect((await upload(url, body, { token: "wrong" })).status).toBe(401);

    // A replay is answered before its body is drained; its request ends (and counts) after.
    let scraped = await scrape(url);
    for (let tries = 0; tries < 100; tries++) {
      if (sample(scraped.text, REPLAYED) !== undefined) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
      scraped = await scrape(url);
    }
    const { status, type, text } = scraped;
    expect(status).toBe(200);
    expect(type).toContain("text/plain");
    expect(sample(text, 'distributor_uploads_total{pipeline="reports",outcome="accepted"}')).toBe(
      1,
    );
    expect(sample(text, 'distributor_uploads_total{pipeline="reports",outcome="replayed"}')).toBe(
      1,
    );
    expect(sample(text, 'distributor_runs_total{pipeline="reports",status="succeeded"}')).toBe(1);
    expect(sample(text, 'distributor_runs_total{pipeline="other",status="succeeded"}')).toBe(0);
    expect(sample(text, 'distributor_run_duration_seconds_count{pipeline="reports"}')).toBe(1);
    expect(sample(text, 'distributor_upload_duration_seconds_count{pipeline="reports"}')).toBe(2);
    expect(sample(text, 'distributor_upload_received_bytes_total{pipeline="reports"}')).toBe(
      body.length,
    );
    expect(sample(text, "distributor_queue_depth")).toBe(0);
    expect(text).toContain("distributor_serve_process_resident_memory_bytes");
    // Bounded labels: no run id, token or key anywhere.
    expect(text).not.toContain(accepted.json.run_id as string);
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain("k1");
  });

  it("needs an upload token unless the configuration makes it public", async () => {
    const closed = await serve();
    expect((await scrape(closed.url, null)).status).toBe(401);
    const open = await serve(
      parseConfig(
        `server:
  metrics: {public: true}
  http: {staging_directory: ${root}/public-staging}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${root}/public-site}
`,
        { sourceName: "public.yml" },
      ),
    );
    expect((await scrape(open.url, null)).status).toBe(200);
  });
});

describe("GET /readyz", () => {
  it("is ready while the store and staging answer, and says which does not", async () => {
    const config = uploadConfig(root);
    const { url } = await serve(config);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, checks: { store: "ok", staging: "ok" } });
    // The staging directory gone (as a lost mount would leave it): not ready.
    await rm(config.server.http.stagingDirectory, { recursive: true, force: true });
    const notReady = await fetch(`${url}/readyz`);
    expect(notReady.status).toBe(503);
    const body = (await notReady.json()) as { ready: boolean; checks: Record<string, string> };
    expect(body.ready).toBe(false);
    expect(body.checks.store).toBe("ok");
    expect(body.checks.staging).toContain(config.server.http.stagingDirectory);
    // /healthz only says the process answers.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

describe("log events", () => {
  it("has a level for every event and one event per state change of a run", async () => {
    const { url, events } = await serve();
    const body = await bundleArchive(root, "reports.logged", { "report.md": REPORT });
    const accepted = await upload(url, body);
    const runId = accepted.json.run_id as string;
    await waitForRun(url, runId);
    const states = events
      .filter((e) => e.type === "run_state" && e.run_id === runId)
      .map((e) => (e as { state: string }).state);
    expect(states).toEqual(["queued", "started"]);
    expect(events.some((e) => e.type === "run" && e.run_id === runId)).toBe(true);
    for (const event of events)
      expect(["debug", "info", "warn", "error"]).toContain(eventLevel(event));
    expect(eventLevel({ type: "warning", message: "x" })).toBe("warn");
    const request = events.find((e) => e.type === "request");
    expect(request === undefined ? undefined : eventLevel(request)).toBe("info");
  });
});
