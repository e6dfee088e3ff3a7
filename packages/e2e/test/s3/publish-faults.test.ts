import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expectAgreement } from "@distributor/engine/testing";
import {
  type BackendRegistry,
  type Config,
  createManifestWorkflow,
  parseConfig,
  prune,
  type RunReport,
  run,
  runSucceeded,
} from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import {
  faultRepeats,
  type ProxiedRequest,
  type ProxiedRequestHead,
  startTcpProxy,
  type TcpProxy,
} from "@distributor/storage/testing";
import { createS3Backend } from "@distributor/storage-s3";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  backendOn,
  createBucket,
  emptyBucket,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

// The commit protocol of docs/design/commit-protocol.md against a real Ceph RGW, with the faults a network makes
// between the run and the service: an answer lost after the service did the work, an answer
// held until the client gives up, a service that stops answering altogether. After each, a run
// that reported success has left state and bytes in agreement, and the next plain run (later,
// when a lease the faulted run left is stale) succeeds and leaves exactly V2 published, with no
// temp debris and no lease but an expired one a skip does not read.

const found = s3Server();

const V1 = { "a.txt": "a one\n", "b.txt": "b one\n", "docs/c.txt": "c one\n" };
/** Against V1: `a.txt` changed, `docs/c.txt` removed (and its directory with it), `d.txt` new. */
const V2 = { "a.txt": "a two\n", "b.txt": "b one\n", "d.txt": "d two\n" };
const VERSIONS = { v1: V1, v2: V2 } as const;
type Version = keyof typeof VERSIONS;

/** The plain run after a fault runs this much later: a lease the faulted run left is stale. */
const LATER_MS = 10 * 60_000;
/** The timeouts of the runs that meet a held answer or a hung service. */
const SHORT_TIMEOUTS = "{connect: 2s, request: 1s}";
/** How long such a run may take at most: a few requests, each retried, each bounded. */
const BOUNDED_MS = 30_000;

const sha256 = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;
const recordedOf = (files: Record<string, string>) =>
  Object.fromEntries(Object.entries(files).map(([path, text]) => [path, sha256(text)]));

/** Every error a run reported, for messages and for naming a timeout. */
const errorsOf = (report: RunReport) => [
  ...report.actions.flatMap((action) =>
    action.error === null ? [] : [`${action.error.code}: ${action.error.message}`],
  ),
  ...report.pipeline_errors.map((error) => `${error.code}: ${error.message}`),
];

type Scenario = "first publication" | "replacement";
const SCENARIOS: Scenario[] = ["first publication", "replacement"];

describe.skipIf(found === undefined)("publishing to Ceph RGW through a fault proxy", () => {
  const server = found as S3Server;
  const rgw = new URL(server.endpoint);
  let bucket = "";
  let dir = "";
  let proxy: TcpProxy | undefined;
  const opened: StorageBackend[] = [];

  beforeAll(async () => {
    bucket = await createBucket(server, "publish-faults");
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-publish-faults-"));
    for (const [version, files] of Object.entries(VERSIONS)) {
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(dir, version, path)), { recursive: true });
        await writeFile(join(dir, version, path), text);
      }
      await createManifestWorkflow({
        path: join(dir, version),
        id: "reports.example",
        created: new Date(Date.UTC(2026, 5, version === "v1" ? 1 : 2)),
      });
    }
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const backend of opened.splice(0)) await backend.close();
    await proxy?.close();
    proxy = undefined;
  });

  /** Destinations open as the CLI opens them, with the gateway's credentials. */
  const backends: BackendRegistry = {
    s3: async (location) =>
      createS3Backend({
        bucket: location.bucket,
        prefix: location.prefix,
        region: location.region,
        forcePathStyle: location.forcePathStyle,
        ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
        ...(location.timeouts?.connectMs === undefined
          ? {}
          : { connectTimeoutMs: location.timeouts.connectMs }),
        ...(location.timeouts?.requestMs === undefined
          ? {}
          : { requestTimeoutMs: location.timeouts.requestMs }),
      }),
  };

  const configFor = (
    version: Version,
    prefix: string,
    endpoint: string,
    timeouts?: string,
  ): Config =>
    parseConfig(`pipelines:
  - id: reports
    source: {backend: local, path: ${join(dir, version)}}
    destinations:
      - id: archive
        backend: s3
        bucket: ${bucket}
        prefix: ${prefix}
        endpoint: "${endpoint}"
        force_path_style: true${timeouts === undefined ? "" : `\n        timeouts: ${timeouts}`}
`);

  /** The destination straight at the gateway, for what the store really holds. */
  const direct = (prefix: string): StorageBackend => {
    const backend = backendOn(server, bucket, prefix);
    opened.push(backend);
    return backend;
  };

  /** A run without faults, straight at the gateway; it must succeed. */
  const plainRun = async (version: Version, prefix: string, now?: () => Date) => {
    const report = await run({
      config: configFor(version, prefix, server.endpoint),
      pipelineIds: ["reports"],
      backends,
      ...(now === undefined ? {} : { now }),
    });
    expect(runSucceeded(report), `plain run of ${version}: ${errorsOf(report).join("; ")}`).toBe(
      true,
    );
    return report;
  };

  /** Whether the bytes at the destination are exactly `files`, as the state records them. */
  const expectPublished = async (
    prefix: string,
    files: Record<string, string>,
    label: string,
    staleLeasesAt?: Date,
  ) => {
    const backend = direct(prefix);
    const recorded = await expectAgreement(backend, {
      label,
      ...(staleLeasesAt === undefined ? {} : { staleLeasesAt }),
    });
    expect(recorded, `${label}: recorded outputs`).toEqual(recordedOf(files));
    for (const [path, text] of Object.entries(files)) {
      expect(Buffer.from(await backend.readFile(path)).toString(), `${label}: ${path}`).toBe(text);
    }
  };

  interface FaultCase {
    scenario: Scenario;
    /** Arms the fault on the proxy; the key matcher names the case's own objects. */
    arm(proxy: TcpProxy, key: (path: string) => string): Promise<ProxiedRequest | undefined>;
    timeouts?: string;
  }

  interface Outcome {
    succeeded: boolean;
    errors: string[];
    ms: number;
    /** The request the fault hit, once it did. */
    hit: ProxiedRequest | undefined;
  }

  /**
   * Brings a fresh prefix to where the case starts (nothing, or V1 published cleanly), publishes
   * V2 through the proxy with the fault armed, checks the invariant, then publishes V2 again
   * with no fault, later, and checks that exactly V2 is there with no debris.
   */
  const faultCase = async (spec: FaultCase): Promise<Outcome> => {
    const prefix = uniqueName("site");
    const label = `${spec.scenario} ${prefix}`;
    if (spec.scenario === "replacement") {
      await plainRun("v1", prefix);
      await expectPublished(prefix, V1, `${label}, V1`);
    }
    proxy = await startTcpProxy({
      target: { host: rgw.hostname, port: Number(rgw.port) },
      http: true,
    });
    const key = (path: string) => `/${bucket}/${prefix}/${path}`;
    const fault = spec.arm(proxy, key);
    let hit: ProxiedRequest | undefined;
    void fault.then(
      (request) => {
        hit = request;
      },
      () => undefined,
    );
    const started = Date.now();
    const report = await run({
      config: configFor("v2", prefix, `http://127.0.0.1:${proxy.port}`, spec.timeouts),
      pipelineIds: ["reports"],
      backends,
    });
    const ms = Date.now() - started;
    const succeeded = runSucceeded(report);
    const errors = errorsOf(report);
    // Whatever the outcome, the fault must have met its request, or the case tested nothing.
    await Promise.race([fault.catch(() => undefined), new Promise((r) => setTimeout(r, 2_000))]);
    await proxy.close();
    proxy = undefined;
    if (succeeded) {
      // A run that reports success has published V2, right then: state and bytes agree.
      const recorded = await expectAgreement(direct(prefix), {
        debris: true,
        label: `${label}, after the faulted run`,
      });
      expect(recorded, `${label}: recorded outputs after the faulted run`).toEqual(recordedOf(V2));
    }
    const later = () => new Date(Date.now() + LATER_MS);
    await plainRun("v2", prefix, later);
    // A run whose commit landed unanswered leaves its lease, expired; the next run then skips,
    // reading the state alone, and the lease waits for the next write (docs/decisions.md).
    await expectPublished(prefix, V2, `${label}, after the next plain run`, later());
    return { succeeded, errors, ms, hit };
  };

  const isWrite = (path: string) => (request: ProxiedRequestHead) =>
    request.method === "PUT" && request.path.split("?")[0] === path;
  /**
   * From its first write on, any request for the object at `path`: the write, the SDK's
   * retries of it, the reads back (reads before the write, e.g. planning's, pass).
   */
  const fromWriteOn = (path: string) => {
    let writing = false;
    return (request: ProxiedRequestHead) => {
      if (isWrite(path)(request)) writing = true;
      return writing && request.path.split("?")[0] === path;
    };
  };

  /**
   * Holds the answer to every request for the object at `path` from its first write on (up to a
   * dozen), so that neither the SDK's retries nor a read-back ever learn what happened: the
   * write was done, and the client cannot know. Resolves with the first request held.
   */
  const holdEvery = (proxy: TcpProxy, path: string) => {
    const match = fromWriteOn(path);
    const first = proxy.holdAnswer(match);
    for (let more = 1; more < 12; more++) void proxy.holdAnswer(match);
    return first;
  };

  describe.each(SCENARIOS)("%s", (scenario) => {
    it("resolves a state compare-and-swap whose answer was lost by reading it back", {
      repeats: faultRepeats(),
    }, async () => {
      const outcome = await faultCase({
        scenario,
        arm: (proxy, key) => proxy.loseAnswer(isWrite(key(".distributor.json"))),
      });
      expect(outcome.hit?.method).toBe("PUT");
      // The service stored the state; the adapter's read-back finds its own write.
      expect(outcome.succeeded, outcome.errors.join("; ")).toBe(true);
    });

    it("resolves the commit's compare-and-swap, after the state was marked, whose answer was lost", {
      repeats: faultRepeats(),
    }, async () => {
      // A replacement first marks the state (one PUT), then commits (the next): lose the
      // commit's answer. A first publication has no state to mark: its one PUT is the commit.
      const writes = scenario === "replacement" ? 2 : 1;
      const outcome = await faultCase({
        scenario,
        arm: (proxy, key) => {
          let seen = 0;
          const state = isWrite(key(".distributor.json"));
          return proxy.loseAnswer((request) => state(request) && ++seen === writes);
        },
      });
      expect(outcome.hit?.method).toBe("PUT");
      expect(outcome.succeeded, outcome.errors.join("; ")).toBe(true);
    });

    it("resolves an output write whose answer was lost by reading it back", async () => {
      const outcome = await faultCase({
        scenario,
        arm: (proxy, key) => proxy.loseAnswer(isWrite(key("a.txt"))),
      });
      expect(outcome.hit?.method).toBe("PUT");
      expect(outcome.succeeded, outcome.errors.join("; ")).toBe(true);
    });

    it("resolves an output write whose answer is held, once its request times out", async () => {
      const outcome = await faultCase({
        scenario,
        timeouts: SHORT_TIMEOUTS,
        arm: (proxy, key) => proxy.holdAnswer(isWrite(key("a.txt"))),
      });
      expect(outcome.hit?.method).toBe("PUT");
      expect(outcome.ms).toBeLessThan(BOUNDED_MS);
      // The held PUT was done: the SDK's retry meets it and the read-back finds its own write.
      expect(outcome.succeeded, outcome.errors.join("; ")).toBe(true);
    });

    it("fails within bounded time, naming the timeout, when no answer about an output comes", async () => {
      const outcome = await faultCase({
        scenario,
        timeouts: SHORT_TIMEOUTS,
        arm: (proxy, key) => holdEvery(proxy, key("a.txt")),
      });
      expect(outcome.hit?.method).toBe("PUT");
      expect(outcome.succeeded).toBe(false);
      expect(outcome.ms).toBeLessThan(BOUNDED_MS);
      expect(outcome.errors.join("; ")).toMatch(/a\.txt timed out/);
    });

    it("leaves a state write whose outcome stays unknown to the next run's recovery", {
      repeats: faultRepeats(),
    }, async () => {
      const outcome = await faultCase({
        scenario,
        timeouts: SHORT_TIMEOUTS,
        arm: (proxy, key) => holdEvery(proxy, key(".distributor.json")),
      });
      expect(outcome.hit?.method).toBe("PUT");
      expect(outcome.succeeded).toBe(false);
      expect(outcome.ms).toBeLessThan(BOUNDED_MS);
      const errors = outcome.errors.join("; ");
      expect(errors).toMatch(/\.distributor\.json timed out/);
      expect(errors).toContain("whether it was committed is not known");
      // The state did land (the held PUT was done): the journal the run left must let the next
      // run finish the publication, deletes of what V2 no longer records included.
    });

    it("fails within bounded time, naming the timeout, when the service hangs", async () => {
      const outcome = await faultCase({
        scenario,
        timeouts: SHORT_TIMEOUTS,
        // A first publication meets a service that never answers at all; a replacement, one
        // that stops answering right after it stored the first output of the run.
        arm: (proxy, key) => {
          if (scenario === "first publication") {
            proxy.hang();
            return Promise.resolve({ method: "", path: "" });
          }
          return proxy.holdAnswer(isWrite(key("a.txt"))).then((request) => {
            proxy.hang();
            return request;
          });
        },
      });
      expect(outcome.hit).toBeDefined();
      expect(outcome.succeeded).toBe(false);
      expect(outcome.ms).toBeLessThan(BOUNDED_MS);
      expect(outcome.errors.join("; ")).toMatch(/timed out/);
    });
  });

  it("replacement: resolves a fenced delete of a retired output whose answer was lost", async () => {
    const outcome = await faultCase({
      scenario: "replacement",
      // A fenced delete is a HEAD and a DELETE of its own (unfenced ones go as POST ?delete).
      arm: (proxy, key) =>
        proxy.loseAnswer(
          (request) =>
            request.method === "DELETE" && request.path.split("?")[0] === key("docs/c.txt"),
        ),
    });
    expect(outcome.hit?.method).toBe("DELETE");
    expect(outcome.succeeded, outcome.errors.join("; ")).toBe(true);
  });

  it("bundle prune: resolves the fenced delete of a pruned bundle's state whose answer was lost", async () => {
    const prefix = uniqueName("archive");
    const source = join(dir, prefix);
    for (const [day, files] of [
      ["days/1", V1],
      ["days/2", V2],
    ] as const) {
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(source, day, path)), { recursive: true });
        await writeFile(join(source, day, path), text);
      }
      await createManifestWorkflow({
        path: join(source, day),
        id: "reports.example",
        created: new Date(Date.UTC(2026, 5, day === "days/1" ? 1 : 2)),
      });
    }
    const archive = (endpoint: string) =>
      parseConfig(`pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - id: archive
        backend: s3
        bucket: ${bucket}
        prefix: ${prefix}
        endpoint: "${endpoint}"
        force_path_style: true
        retention: {prune: {enabled: true, keep_latest: 1}}
`);
    const published = await run({ config: archive(server.endpoint), backends });
    expect(runSucceeded(published), errorsOf(published).join("; ")).toBe(true);

    proxy = await startTcpProxy({
      target: { host: rgw.hostname, port: Number(rgw.port) },
      http: true,
    });
    const stateKey = `/${bucket}/${prefix}/days/1/.distributor.json`;
    const fault = proxy.loseAnswer(
      (request) => request.method === "DELETE" && request.path.split("?")[0] === stateKey,
    );
    const outcome = await prune({
      config: archive(`http://127.0.0.1:${proxy.port}`),
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      backends,
    }).then(
      (report) => ({ ok: true as const, report, error: undefined }),
      (error: unknown) => ({ ok: false as const, report: undefined, error }),
    );
    const hit = await Promise.race([
      fault.catch(() => undefined),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 2_000)),
    ]);
    await proxy.close();
    proxy = undefined;
    expect(hit?.method).toBe("DELETE");
    if (outcome.ok) {
      expect(outcome.report.deleted_bundles.map((b) => b.bundle_path)).toEqual(["days/1"]);
      await expectAgreement(direct(prefix), { debris: true, label: "after the faulted prune" });
    }
    // Later, a plain prune finishes whatever is left; then only days/2 is there, with no debris.
    const next = await prune({
      config: archive(server.endpoint),
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      backends,
      now: () => new Date(Date.now() + LATER_MS),
    });
    expect(next.checked_count, String(outcome.error)).toBe(1);
    const recorded = await expectAgreement(direct(prefix), { label: "after the next prune" });
    expect(recorded).toEqual(
      Object.fromEntries(Object.entries(recordedOf(V2)).map(([p, d]) => [`days/2/${p}`, d])),
    );
  });
});
