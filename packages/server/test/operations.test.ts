import { rm } from "node:fs/promises";
import { join } from "node:path";
import { parseConfig } from "@distributor/publish";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventLevel, type UploadServerOptions } from "../src/server.js";
import { createMemoryUploadStore } from "../src/store/memory-store.js";
import {
  bundleArchive,
  faultyBackends,
  getJson,
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

async function serve(
  config = uploadConfig(root),
  options: Partial<UploadServerOptions> = {},
): Promise<Running> {
  const started = await startServer(config, options);
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

/** Scrapes until the sample `line` has a value `accept` takes, and returns it. */
async function waitForSample(
  url: string,
  line: string,
  accept: (value: number) => boolean,
): Promise<number> {
  for (let tries = 0; ; tries++) {
    const value = sample((await scrape(url)).text, line);
    if (value !== undefined && accept(value)) return value;
    if (tries > 200) throw new Error(`${line} is ${value}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
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

  it("counts refusals by code, failed runs, staged bytes and store errors, in text the format's parser reads", async () => {
    const failing = { fail: false };
    const memory = createMemoryUploadStore({ queueSize: 8, retentionMs: 3_600_000 });
    // A failing wrapper: listing runs fails while `failing.fail` is set, as an unreachable store would.
    const store = new Proxy(memory, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property === "listRuns") {
          return async (...args: unknown[]) => {
            if (failing.fail) throw new Error("store unreachable");
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return value;
      },
    });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let writes = 0;
    const { url } = await serve(uploadConfig(root), {
      store,
      // The first upload's run waits in its first write until released; later runs fail.
      backends: faultyBackends(join(root, "site"), {
        gate,
        gateWhen: () => writes++ === 0,
      }),
    });
    const body = await bundleArchive(root, "reports.one", { "report.md": REPORT });
    const held = await upload(url, body);
    expect(held.status).toBe(202);
    // While its run waits, the staged files are counted: the report and the manifest.
    const staged = await waitForSample(url, "distributor_staging_bytes", (value) => value > 0);
    expect(staged).toBeGreaterThan(REPORT.length);
    release();
    await waitForRun(url, held.json.run_id as string);

    const tooLarge = await upload(url, Buffer.alloc(70 * 1024, 1));
    expect(tooLarge.status).toBe(413);
    const notAnArchive = await upload(url, Buffer.from("not a gzip stream"));
    expect(notAnArchive.status).toBe(422);
    const refusedCode = (notAnArchive.json.error as { code: string }).code;
    // A run that fails: its destination refuses every write.
    const failingRun = await startServer(uploadConfig(root), {
      backends: faultyBackends(join(root, "site"), { fail: new Error("disk on fire") }),
    });
    running.push(failingRun);
    const doomed = await upload(
      failingRun.url,
      await bundleArchive(root, "reports.two", { "b.md": REPORT }),
    );
    expect((await waitForRun(failingRun.url, doomed.json.run_id as string)).status).toBe("failed");
    failing.fail = true;
    expect((await getJson(url, "/runs")).status).toBe(500);
    failing.fail = false;

    const families = new Map(
      parsePrometheusTextFormat((await scrape(url)).text).map((family) => [family.name, family]),
    );
    const value = (name: string, labels: Record<string, string> = {}) =>
      Number(
        families
          .get(name)
          ?.metrics.find((metric) =>
            Object.entries(labels).every(([key, wanted]) => metric.labels?.[key] === wanted),
          )?.value,
      );
    expect(families.get("distributor_uploads_total")?.type).toBe("COUNTER");
    expect(value("distributor_uploads_total", { pipeline: "reports", outcome: "accepted" })).toBe(
      1,
    );
    expect(
      value("distributor_uploads_total", { pipeline: "reports", outcome: "upload_too_large" }),
    ).toBe(1);
    expect(value("distributor_uploads_total", { pipeline: "reports", outcome: refusedCode })).toBe(
      1,
    );
    expect(value("distributor_runs_total", { pipeline: "reports", status: "succeeded" })).toBe(1);
    expect(value("distributor_runs_total", { pipeline: "reports", status: "failed" })).toBe(0);
    expect(value("distributor_store_errors_total")).toBe(1);
    expect(value("distributor_run_takeovers_total")).toBe(0);
    expect(value("distributor_staging_bytes")).toBe(0);
    expect(families.get("distributor_upload_duration_seconds")?.type).toBe("HISTOGRAM");
    // Three uploads answered on this server: the accepted one, the 413 and the 422.
    expect(families.get("distributor_upload_duration_seconds")?.metrics[0]?.buckets?.["+Inf"]).toBe(
      "3",
    );

    const other = new Map(
      parsePrometheusTextFormat((await scrape(failingRun.url)).text).map((family) => [
        family.name,
        family,
      ]),
    );
    expect(
      other
        .get("distributor_runs_total")
        ?.metrics.find(
          (metric) => metric.labels?.pipeline === "reports" && metric.labels.status === "failed",
        )?.value,
    ).toBe("1");
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
