import { createHash } from "node:crypto";
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expectAgreement } from "@distributor/engine/testing";
import {
  type BackendRegistry,
  type Config,
  createManifestWorkflow,
  parseConfig,
  type RunReport,
  run,
  runSucceeded,
} from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import { faultRepeats, startTcpProxy, type TcpProxy } from "@distributor/storage/testing";
import { createSshBackend } from "@distributor/storage-ssh";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freshRoot, server, sshd } from "./shared.js";

// The commit protocol of docs/design/commit-protocol.md against a real OpenSSH server, with a TCP proxy in between
// that cuts the connection in the middle of one chosen step of a publication: the state's
// compare-and-swap, an output's write, the delete of a replaced output. SFTP is encrypted, so the
// step is found from the outside: a wrapper around the destination backend sees the call start
// and cuts then (nothing done yet), or watches the server's directory (the server runs here)
// and cuts the moment the step is done on disk, while its answer is still on its way back (the
// proxy delays each direction). Either way the client cannot know what happened. After each, a
// run that reported success has left state and bytes in agreement, and the next plain run
// (later, when a lease the faulted run left is stale) succeeds and leaves exactly V2, with no
// temp debris and no lease but an expired one a skip does not read.

const V1 = { "a.txt": "a one\n", "b.txt": "b one\n", "docs/c.txt": "c one\n" };
/** Against V1: `a.txt` changed, `docs/c.txt` removed (and its directory with it), `d.txt` new. */
const V2 = { "a.txt": "a two\n", "b.txt": "b one\n", "d.txt": "d two\n" };
const VERSIONS = { v1: V1, v2: V2 } as const;
type Version = keyof typeof VERSIONS;

/** The plain run after a fault runs this much later: a lease the faulted run left is stale. */
const LATER_MS = 10 * 60_000;
/**
 * Delay the proxy adds to each direction when a cut waits for a step to be done: its answer
 * spends this long on its way back, and the cut made meanwhile loses it, so "done on the server,
 * unknown to the client" is a window, not a race.
 */
const ANSWER_DELAY_MS = 40;
/** A case runs up to three publications, one of them slowed by the proxy's delay. */
const CASE_MS = 90_000;
/** How long a run against a hung server may take at most: a few bounded waits. */
const BOUNDED_MS = 30_000;

const sha256 = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;
const recordedOf = (files: Record<string, string>) =>
  Object.fromEntries(Object.entries(files).map(([path, text]) => [path, sha256(text)]));

const errorsOf = (report: RunReport) => [
  ...report.actions.flatMap((action) =>
    action.error === null ? [] : [`${action.error.code}: ${action.error.message}`],
  ),
  ...report.pipeline_errors.map((error) => `${error.code}: ${error.message}`),
];

type Scenario = "first publication" | "replacement";
const SCENARIOS: Scenario[] = ["first publication", "replacement"];

/** The step of the faulted run the cut aims at, by the backend call that carries it out. */
interface Step {
  method: "writeFile" | "deletePaths";
  /** The path written, or one of the paths deleted (bundle-relative; the bundle path is ""). */
  path: string;
}

/**
 * When the connection is cut: `start` right after the call began (its first request may reach
 * the server, nothing after it); `done` as soon as the server's directory shows the step done
 * (the file there, or gone), before its answer reaches the client.
 */
type CutAt = "start" | "done";

describe.skipIf(sshd === null)("publishing over SFTP through a fault proxy", () => {
  let dir = "";
  let proxy: TcpProxy | undefined;
  const opened: StorageBackend[] = [];
  const watchers: FSWatcher[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-ssh-publish-faults-"));
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
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const watcher of watchers.splice(0)) watcher.close();
    for (const backend of opened.splice(0)) await backend.close();
    await proxy?.close();
    proxy = undefined;
  });

  /** A backend registry whose `ssh` destinations open as the CLI opens them, with the test key. */
  const registry = (wrap?: (backend: StorageBackend) => StorageBackend): BackendRegistry => ({
    ssh: async (location) => {
      const backend = await createSshBackend({
        host: location.host,
        port: location.port,
        user: location.user,
        root: location.path,
        authentication: {
          method: "private_key",
          privateKey: await readFile(server().clientKeyFile),
        },
        knownHostsFile: location.knownHostsFile,
        hostKeyPolicy: location.hostKeyPolicy,
        ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
        ...(location.timeouts?.connectMs === undefined
          ? {}
          : { connectTimeoutMs: location.timeouts.connectMs }),
        ...(location.timeouts?.requestMs === undefined
          ? {}
          : { operationTimeoutMs: location.timeouts.requestMs }),
      });
      return wrap === undefined ? backend : wrap(backend);
    },
  });

  const configFor = (
    version: Version,
    root: string,
    endpoint: { port: number; knownHostsFile: string },
    timeouts?: string,
  ): Config =>
    parseConfig(`pipelines:
  - id: reports
    source: {backend: local, path: ${join(dir, version)}}
    destinations:
      - id: archive
        backend: ssh
        host: 127.0.0.1
        port: ${endpoint.port}
        user: ${server().user}
        path: ${root}
        known_hosts_file: ${endpoint.knownHostsFile}${timeouts === undefined ? "" : `\n        timeouts: ${timeouts}`}
`);

  const directEndpoint = () => ({ port: server().port, knownHostsFile: server().knownHostsFile });

  /** The destination straight at the server, for what it really holds. */
  const direct = async (root: string): Promise<StorageBackend> => {
    const backend = await createSshBackend({
      host: server().host,
      port: server().port,
      user: server().user,
      root,
      authentication: { method: "private_key", privateKey: await readFile(server().clientKeyFile) },
      knownHostsFile: server().knownHostsFile,
    });
    opened.push(backend);
    return backend;
  };

  const plainRun = async (version: Version, root: string, now?: () => Date) => {
    const report = await run({
      config: configFor(version, root, directEndpoint()),
      pipelineIds: ["reports"],
      backends: registry(),
      ...(now === undefined ? {} : { now }),
    });
    expect(runSucceeded(report), `plain run of ${version}: ${errorsOf(report).join("; ")}`).toBe(
      true,
    );
  };

  const expectPublished = async (
    root: string,
    files: Record<string, string>,
    label: string,
    staleLeasesAt?: Date,
  ) => {
    const backend = await direct(root);
    const recorded = await expectAgreement(backend, {
      label,
      ...(staleLeasesAt === undefined ? {} : { staleLeasesAt }),
    });
    expect(recorded, `${label}: recorded outputs`).toEqual(recordedOf(files));
    for (const [path, text] of Object.entries(files)) {
      expect(Buffer.from(await backend.readFile(path)).toString(), `${label}: ${path}`).toBe(text);
    }
  };

  /** A proxy in front of the shared sshd, and a known_hosts file that trusts it at its port. */
  const startProxy = async (delayMs = 0) => {
    const started = await startTcpProxy({
      target: { host: server().host, port: server().port },
      delayMs,
    });
    proxy = started;
    const [, type, key] = server().knownHostsLine.trim().split(" ");
    const knownHostsFile = join(dir, `known_hosts_${started.port}`);
    await writeFile(knownHostsFile, `[127.0.0.1]:${started.port} ${type} ${key}\n`);
    return { proxy: started, endpoint: { port: started.port, knownHostsFile } };
  };

  /**
   * Wraps the destination so that the call carrying `step` (its first one) calls `act` as it
   * starts; `met` tells whether it came.
   */
  const onStep = (step: Step, act: () => void) => {
    let met = false;
    const wrap = (backend: StorageBackend): StorageBackend =>
      new Proxy(backend, {
        get(target, property) {
          const value = Reflect.get(target, property, target);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            const hits =
              property === step.method &&
              (step.method === "writeFile"
                ? args[0] === step.path
                : (args[1] as readonly string[]).includes(step.path));
            if (hits && !met) {
              met = true;
              act();
            }
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
    return { wrap, met: () => met };
  };

  /**
   * Calls `then` the first time the server's directory shows the step done: `path` (below
   * `root`) holding other bytes than when this was called, or gone for a delete. Looked at
   * synchronously on each change of its directory, so the cut follows within a millisecond or two.
   */
  const whenDone = (root: string, step: Step, then: () => void) => {
    const full = join(root, step.path);
    const directory = dirname(full);
    const name = full.slice(directory.length + 1);
    const read = () => {
      try {
        return readFileSync(full, "utf8");
      } catch {
        return undefined;
      }
    };
    const before = read();
    const watcher = watch(directory, (_event, changed) => {
      if (changed !== name) return;
      const now = read();
      const done = step.method === "deletePaths" ? now === undefined : now !== before;
      if (!done) return;
      watcher.close();
      then();
    });
    watchers.push(watcher);
  };

  interface Outcome {
    succeeded: boolean;
    errors: string[];
    ms: number;
    /** The step was met (and the cut, or the hang, fired). */
    faulted: boolean;
  }

  /**
   * Brings a fresh root to where the case starts (empty, or V1 published cleanly), publishes V2
   * through the proxy with the fault armed on `step`, checks the invariant, then publishes V2
   * again with no fault, later, and checks that exactly V2 is there with no debris.
   */
  const faultCase = async (
    scenario: Scenario,
    step: Step,
    fault: CutAt | "hang",
    timeouts?: string,
  ): Promise<Outcome> => {
    const root = await freshRoot();
    const label = `${scenario}, ${fault} of ${step.method}(${step.path}) in ${root}`;
    if (scenario === "replacement") {
      await plainRun("v1", root);
      await expectPublished(root, V1, `${label}, V1`);
    }
    const { proxy, endpoint } = await startProxy(fault === "done" ? ANSWER_DELAY_MS : 0);
    let faulted = false;
    const cut = () => {
      faulted = true;
      void proxy.cutAll();
    };
    const trigger = onStep(step, () => {
      if (fault === "hang") {
        faulted = true;
        proxy.hang();
      } else if (fault === "start") setImmediate(cut);
      else whenDone(root, step, cut);
    });
    const started = Date.now();
    const report = await run({
      config: configFor("v2", root, endpoint, timeouts),
      pipelineIds: ["reports"],
      backends: registry(trigger.wrap),
    });
    const ms = Date.now() - started;
    const succeeded = runSucceeded(report);
    const errors = errorsOf(report);
    expect(trigger.met(), `${label}: the step never came`).toBe(true);
    await proxy.close();
    if (succeeded) {
      const recorded = await expectAgreement(await direct(root), {
        debris: true,
        label: `${label}, after the faulted run`,
      });
      expect(recorded, `${label}: recorded outputs after the faulted run`).toEqual(recordedOf(V2));
    }
    const later = () => new Date(Date.now() + LATER_MS);
    await plainRun("v2", root, later);
    // A run whose commit landed unanswered leaves its lease, expired; the next run then skips,
    // reading the state alone, and the lease waits for the next write (docs/decisions.md).
    await expectPublished(root, V2, `${label}, after the next plain run`, later());
    return { succeeded, errors, ms, faulted };
  };

  const STATE: Step = { method: "writeFile", path: ".distributor.json" };
  const OUTPUT: Step = { method: "writeFile", path: "a.txt" };
  const RETIRED: Step = { method: "deletePaths", path: "docs/c.txt" };

  describe.each(SCENARIOS)("%s", (scenario) => {
    /** Each step, and what the faulted run must say about it. */
    const steps: [string, Step, string][] = [
      ["the state's compare-and-swap", STATE, "whether it was committed is not known"],
      // Outputs go out in parallel: whichever write meets the dead connection first names it.
      ["an output's write", OUTPUT, "write stream ssh:"],
      ...(scenario === "replacement"
        ? ([
            [
              "the delete of a replaced output",
              RETIRED,
              "published, but removing the outputs it replaced failed",
            ],
          ] as [string, Step, string][])
        : []),
    ];
    for (const [name, step, says] of steps) {
      for (const at of ["start", "done"] as const) {
        const when = at === "start" ? "as it starts" : "once the server did it";
        it(`recovers from a connection cut during ${name}, ${when}`, {
          timeout: CASE_MS,
          repeats: faultRepeats(),
        }, async () => {
          const outcome = await faultCase(scenario, step, at);
          expect(outcome.faulted, "the cut never fired").toBe(true);
          // The only connection died mid-step: the run cannot have finished, and says why.
          expect(outcome.succeeded).toBe(false);
          const errors = outcome.errors.join("; ");
          expect(errors).toContain(says);
          expect(errors).toMatch(/connection to \S+ was lost/);
        });
      }
    }

    it(
      "fails within bounded time, naming the timeout, when the server hangs",
      async () => {
        // A first publication meets a server that hangs once the run writes its state; a
        // replacement, one that hangs as the first output goes out.
        const step = scenario === "first publication" ? STATE : OUTPUT;
        const outcome = await faultCase(scenario, step, "hang", "{connect: 2s, request: 1s}");
        expect(outcome.faulted).toBe(true);
        expect(outcome.succeeded).toBe(false);
        expect(outcome.ms).toBeLessThan(BOUNDED_MS);
        expect(outcome.errors.join("; ")).toMatch(/timed out/);
      },
      CASE_MS,
    );
  });

  it(
    "fails within bounded time, naming the timeout, when the server hangs from the start",
    async () => {
      const root = await freshRoot();
      const { proxy, endpoint } = await startProxy();
      proxy.hang();
      const started = Date.now();
      const report = await run({
        config: configFor("v2", root, endpoint, "{connect: 2s, request: 1s}"),
        pipelineIds: ["reports"],
        backends: registry(),
      });
      expect(runSucceeded(report)).toBe(false);
      expect(Date.now() - started).toBeLessThan(BOUNDED_MS);
      expect(errorsOf(report).join("; ")).toMatch(/timed out/);
      await plainRun("v2", root, () => new Date(Date.now() + LATER_MS));
      await expectPublished(root, V2, "after the hung run");
    },
    CASE_MS,
  );
});
