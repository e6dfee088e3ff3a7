import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * What `GET /metrics` reports, in the Prometheus text format: one registry per server (several
 * servers in one process never mix their numbers). Labels stay bounded: pipeline ids (from the
 * configuration, never from a request that named an unknown one), outcome codes and run
 * statuses; never run ids, tokens or keys. Process metrics (CPU, memory, event loop lag, handles)
 * come from prom-client's defaults.
 */
export interface ServerMetrics {
  readonly registry: Registry;
  /** An upload answered: `accepted` (202), `replayed`, or the refusal's error code. */
  upload(pipeline: string, outcome: string, seconds: number): void;
  /** Body bytes an accepted upload carried. */
  received(pipeline: string, bytes: number): void;
  /**
   * A run ended here with `status`: `succeeded`, `failed`, `cancelled`, or `taken_over` when
   * another instance took it over from this one (whatever this instance's attempt came to).
   */
  runFinished(pipeline: string, status: string, seconds: number): void;
  /** A run another instance's lapsed claim left, taken over here. */
  takeover(): void;
  /** A store call failed. */
  storeError(): void;
  /** A resumable upload's PATCH continued from an offset above zero. */
  resumed(pipeline: string): void;
  /** A partial upload's bytes were removed because it expired. */
  partialExpired(count?: number): void;
}

/** Buckets for acceptance (upload received and staged) and run durations, in seconds. */
const ACCEPT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const RUN_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

/**
 * Creates the registry and its metrics. `queueDepth` and `stagingBytes` are read when scraped (a
 * failed read leaves the gauge unset for that scrape and counts a store error, rather than
 * failing the scrape).
 */
export function createServerMetrics(read: {
  pipelines: readonly string[];
  queueDepth: () => Promise<number>;
  stagingBytes: () => Promise<number>;
  /** The partial uploads the staging directory holds now. */
  partials: () => Promise<{ count: number; bytes: number }>;
}): ServerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "distributor_serve_" });
  const known = new Set(read.pipelines);
  // An unknown pipeline named by a request collapses to one label value: labels stay bounded.
  const label = (pipeline: string) => (known.has(pipeline) ? pipeline : "_unknown");
  const uploads = new Counter({
    name: "distributor_uploads_total",
    help: "Uploads answered, by pipeline and outcome (accepted, replayed, or the refusal's error code).",
    labelNames: ["pipeline", "outcome"],
    registers: [registry],
  });
  const bytes = new Counter({
    name: "distributor_upload_received_bytes_total",
    help: "Body bytes of accepted uploads, by pipeline.",
    labelNames: ["pipeline"],
    registers: [registry],
  });
  const acceptance = new Histogram({
    name: "distributor_upload_duration_seconds",
    help: "Time from an upload request to its answer, by pipeline.",
    labelNames: ["pipeline"],
    buckets: ACCEPT_BUCKETS,
    registers: [registry],
  });
  const runs = new Counter({
    name: "distributor_runs_total",
    help: "Upload runs finished, by pipeline and final status.",
    labelNames: ["pipeline", "status"],
    registers: [registry],
  });
  const runDuration = new Histogram({
    name: "distributor_run_duration_seconds",
    help: "Duration of upload runs, by pipeline.",
    labelNames: ["pipeline"],
    buckets: RUN_BUCKETS,
    registers: [registry],
  });
  const takeovers = new Counter({
    name: "distributor_run_takeovers_total",
    help: "Runs this instance took over from an instance of a shared store whose claim had lapsed.",
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: "distributor_store_errors_total",
    help: "Calls to the upload store that failed.",
    registers: [registry],
  });
  new Gauge({
    name: "distributor_queue_depth",
    help: "Uploads accepted and waiting for a worker.",
    registers: [registry],
    async collect() {
      try {
        this.set(await read.queueDepth());
      } catch {
        storeErrors.inc();
      }
    },
  });
  // What the store's live runs hold in staging, not what this instance added and removed: a run
  // accepted here and run (or taken over) elsewhere leaves nothing behind in the gauge.
  new Gauge({
    name: "distributor_staging_bytes",
    help: "Bytes of accepted uploads' files waiting in the staging area for their run.",
    registers: [registry],
    async collect() {
      try {
        this.set(await read.stagingBytes());
      } catch {
        storeErrors.inc();
      }
    },
  });
  const resumes = new Counter({
    name: "distributor_upload_resumes_total",
    help: "PATCH requests of resumable uploads that continued from an offset above zero, by pipeline.",
    labelNames: ["pipeline"],
    registers: [registry],
  });
  const expirations = new Counter({
    name: "distributor_partial_upload_expirations_total",
    help: "Partial uploads whose bytes were removed because server.uploads.partial_ttl passed.",
    registers: [registry],
  });
  // Read from the staging directory, which instances sharing it see alike.
  let partials: Promise<{ count: number; bytes: number }> | undefined;
  const readPartials = () => {
    partials ??= read.partials().finally(() => {
      partials = undefined;
    });
    return partials;
  };
  new Gauge({
    name: "distributor_partial_uploads",
    help: "Partial (resumable) uploads held in the staging directory, not expired.",
    registers: [registry],
    async collect() {
      this.set((await readPartials().catch(() => undefined))?.count ?? 0);
    },
  });
  new Gauge({
    name: "distributor_partial_upload_bytes",
    help: "Bytes partial (resumable) uploads hold in the staging directory.",
    registers: [registry],
    async collect() {
      this.set((await readPartials().catch(() => undefined))?.bytes ?? 0);
    },
  });
  for (const pipeline of known) {
    resumes.labels(pipeline).inc(0);
    // Present from the start, at zero, so that rates work from the first scrape.
    runs.labels(pipeline, "succeeded").inc(0);
    runs.labels(pipeline, "failed").inc(0);
    runs.labels(pipeline, "taken_over").inc(0);
    uploads.labels(pipeline, "accepted").inc(0);
  }
  return {
    registry,
    upload(pipeline, outcome, seconds) {
      uploads.labels(label(pipeline), outcome).inc();
      acceptance.labels(label(pipeline)).observe(seconds);
    },
    received(pipeline, count) {
      bytes.labels(label(pipeline)).inc(count);
    },
    runFinished(pipeline, status, seconds) {
      runs.labels(label(pipeline), status).inc();
      runDuration.labels(label(pipeline)).observe(seconds);
    },
    takeover() {
      takeovers.inc();
    },
    storeError() {
      storeErrors.inc();
    },
    resumed(pipeline) {
      resumes.labels(label(pipeline)).inc();
    },
    partialExpired(count = 1) {
      expirations.inc(count);
    },
  };
}

/**
 * The store, every failed call counted as a store error (`distributor_store_errors_total`); the
 * calls themselves are unchanged.
 */
export function countingStoreErrors<T extends object>(store: T, metrics: ServerMetrics): T {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (result instanceof Promise) {
          return result.catch((error: unknown) => {
            metrics.storeError();
            throw error;
          });
        }
        return result;
      };
    },
  });
}
