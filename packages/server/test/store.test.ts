import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { UploadStore } from "@distributor/upload-store";
import { describeUploadStoreContract, sampleRun } from "@distributor/upload-store/testing";
import { describe, expect, it } from "vitest";
import { openEmbeddedUploadStore } from "../src/store/embedded-store.js";
import { createMemoryUploadStore } from "../src/store/memory-store.js";

describeUploadStoreContract("memory", async (limits) => ({
  store: createMemoryUploadStore(limits),
}));

describeUploadStoreContract("embedded", async (limits) => {
  const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
  const path = join(root, "store");
  return {
    store: await openEmbeddedUploadStore({ ...limits, path }),
    // The abandoned instance's process is "dead": its lock goes, as a restarted serve replaces it.
    reopen: async () => {
      await rm(join(path, "lock"), { force: true });
      return openEmbeddedUploadStore({ ...limits, path });
    },
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});

describe("embedded upload store", () => {
  const limits = { queueSize: 4, retentionMs: 60_000, maxRuns: 10 };

  it("keeps its records in one private log, taking in a store of the earlier layout", async () => {
    await withStorePath(async (path) => {
      // The earlier layout: one file per run and per key, a temporary file of a write
      // interrupted by kill -9, and a key whose run was never written.
      const sample = sampleRun();
      const scope = { tokenId: "reporter", pipelineId: "reports", key: "k" };
      await mkdir(join(path, "runs"), { recursive: true, mode: 0o700 });
      await mkdir(join(path, "keys"), { mode: 0o700 });
      await writeFile(
        join(path, "runs", `${sample.runId}.json`),
        JSON.stringify({
          format: "distributor-upload-run/1",
          seq: 1,
          token_id: "reporter",
          record: sample.run.record,
          job: sample.job,
        }),
      );
      const key = (name: string, runId: string) =>
        JSON.stringify({
          format: "distributor-upload-key/1",
          token_id: "reporter",
          pipeline_id: "reports",
          key: name,
          run_id: runId,
          accepted: sample.accepted,
        });
      await writeFile(join(path, "keys", "a.json"), key("k", sample.runId));
      await writeFile(join(path, "keys", "b.json"), key("lost", "never-written"));
      await writeFile(join(path, "runs", `.x.json.abc.tmp`), '{"trunc');

      // And a temporary file of a rewrite of the log that died half-way.
      await writeFile(join(path, ".records.log.0123456789ab.tmp"), '{"format":"distributor-upl');
      const store = await openEmbeddedUploadStore({ ...limits, path });
      expect((await readdir(path)).sort()).toEqual(["lock", "records.log"]);
      expect((await stat(join(path, "records.log"))).mode & 0o777).toBe(0o600);
      expect((await store.recover()).map((job) => job.runId)).toEqual([sample.runId]);
      expect(await store.claimKey(scope)).toEqual({ kind: "accepted", accepted: sample.accepted });
      expect(await store.claimKey({ ...scope, key: "lost" })).toEqual({ kind: "claimed" });
      const next = await enqueueSample(store);
      await store.close();

      const again = await openEmbeddedUploadStore({ ...limits, path });
      expect((await again.recover()).map((job) => job.runId)).toEqual([sample.runId, next.runId]);
      await again.close();
    });
  });

  it("keeps every record of many concurrent writes sharing flushes", async () => {
    await withStorePath(async (path) => {
      const wide = { queueSize: 40, retentionMs: 60_000, maxRuns: 100 };
      const store = await openEmbeddedUploadStore({ ...wide, path });
      const samples = Array.from({ length: 40 }, () => sampleRun());
      // Every write starts before any resolves: they share flushes of the log.
      await Promise.all(
        samples.map(async (sample, index) => {
          await store.reserveQueueSlot();
          const scope = { tokenId: "reporter", pipelineId: "reports", key: `k${index}` };
          await store.claimKey(scope);
          await store.enqueue(sample.run, sample.job, sample.accepted, scope);
        }),
      );
      await Promise.all(
        samples.map((sample) => store.updateRun(sample.runId, { status: "running" })),
      );
      const lines = (await readFile(join(path, "records.log"), "utf8")).trimEnd().split("\n");
      // The format line, then per run: its record, its key, its running record.
      expect(lines).toHaveLength(1 + 3 * samples.length);
      // A key's line follows its run's.
      for (const [index, sample] of samples.entries()) {
        const runAt = lines.findIndex((line) => line.includes(`"run_id":"${sample.runId}"`));
        const keyAt = lines.findIndex((line) => line.includes(`"key":"k${index}"`));
        expect(runAt).toBeGreaterThan(0);
        expect(keyAt).toBeGreaterThan(runAt);
      }
      await store.close();
      const again = await openEmbeddedUploadStore({ ...wide, path });
      for (const [index, sample] of samples.entries()) {
        expect((await again.getRun(sample.runId))?.record.status).toBe("running");
        expect(
          await again.claimKey({ tokenId: "reporter", pipelineId: "reports", key: `k${index}` }),
        ).toMatchObject({ kind: "accepted" });
      }
      // Opening wrote the log afresh: one line per run and per key.
      const fresh = (await readFile(join(path, "records.log"), "utf8")).trimEnd().split("\n");
      expect(fresh).toHaveLength(1 + 2 * samples.length);
      await again.close();
    });
  });

  it("rewrites its log once it has grown, keeping every record", async () => {
    await withStorePath(async (path) => {
      const store = await openEmbeddedUploadStore({ ...limits, path });
      const sample = await enqueueSample(store);
      // Each change is a line of more than 1 500 bytes: 4 000 of them append over 6 MiB, past the
      // 4 MiB after which the log is written afresh (from one line per record).
      const note = (index: number) => `${index}:${"x".repeat(1500)}`;
      for (let index = 0; index < 4000; index++) {
        await store.updateRun(sample.runId, { status: "running", started_at: note(index) });
      }
      // Written afresh at least once: never more than the threshold and the line after it.
      const size = (await stat(join(path, "records.log"))).size;
      expect(size).toBeLessThanOrEqual(4 * 1024 * 1024 + 4096);
      await store.close();
      const again = await openEmbeddedUploadStore({ ...limits, path });
      expect((await again.getRun(sample.runId))?.record.started_at).toBe(note(3999));
      await again.close();
    });
  });

  it("keeps every acknowledged change of a writer killed with SIGKILL at random moments", async () => {
    await withStorePath(async (path) => {
      const acknowledged = new Map<string, string>();
      for (let round = 0; round < 6; round++) {
        const child = spawn(
          process.execPath,
          [join(import.meta.dirname, "fixtures", "store-writer.mjs"), path, `r${round}`],
          { stdio: ["ignore", "pipe", "pipe"] },
        );
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
          stderr += chunk;
        });
        let pending = "";
        let opened = false;
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
          pending += chunk;
          const lines = pending.split("\n");
          pending = lines.pop() ?? "";
          for (const line of lines) {
            if (line === "open") opened = true;
            const [change, runId] = line.split(" ");
            if (runId !== undefined && change !== undefined) acknowledged.set(runId, change);
          }
        });
        const exited = once(child, "exit");
        await waitFor(async () => opened || child.exitCode !== null, 20_000);
        expect(stderr).toBe("");
        await new Promise((resolve) => setTimeout(resolve, 20 + Math.floor(Math.random() * 300)));
        child.kill("SIGKILL");
        await exited;
      }
      expect(acknowledged.size).toBeGreaterThan(0);
      const store = await openEmbeddedUploadStore({
        path,
        queueSize: 1_000_000,
        retentionMs: 3_600_000,
        maxRuns: 1_000_000,
      });
      try {
        const order = ["queued", "running", "succeeded"];
        for (const [runId, change] of acknowledged) {
          const stored = await store.getRun(runId);
          expect(stored, runId).toBeDefined();
          // At least as far as acknowledged: a later change may have landed unanswered.
          expect(order.indexOf(stored?.record.status ?? ""), runId).toBeGreaterThanOrEqual(
            order.indexOf(change),
          );
          expect(
            await store.claimKey({ tokenId: "reporter", pipelineId: "reports", key: runId }),
          ).toMatchObject({ kind: "accepted", accepted: { run_id: runId } });
        }
      } finally {
        await store.close();
      }
    });
  }, 120_000);

  it("drops a torn last line, and refuses a damaged line with whole lines after it, naming it", async () => {
    await withStorePath(async (path) => {
      const store = await openEmbeddedUploadStore({ ...limits, path });
      const first = await enqueueSample(store);
      const second = await enqueueSample(store);
      await store.close();
      const file = join(path, "records.log");
      const whole = await readFile(file, "utf8");
      // What a power loss can leave: a line cut short, then zeroed blocks.
      await writeFile(file, `${whole}{"run":{"seq":3,"tok\u0000\u0000`);
      const again = await openEmbeddedUploadStore({ ...limits, path });
      expect((await again.recover()).map((job) => job.runId)).toEqual([first.runId, second.runId]);
      await again.close();
      expect(await readFile(file, "utf8")).toBe(whole);

      const [header, one, two] = whole.trimEnd().split("\n");
      await writeFile(file, `${header}\n${one?.slice(0, 20)}\n${two}\n`);
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        `upload store log ${file} line 2 is not JSON`,
      );
    });
  });

  it("allows one open store per directory while its holder lives", async () => {
    await withStorePath(async (path) => {
      const store = await openEmbeddedUploadStore({ ...limits, path });
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        `upload store ${path} is in use by process ${process.pid}`,
      );
      await store.close();
      // A holder that no longer runs is replaced.
      await writeFile(join(path, "lock"), JSON.stringify({ pid: 2 ** 22 + 1, host: hostname() }));
      await (await openEmbeddedUploadStore({ ...limits, path })).close();
    });
  });

  it("treats a holder that is a zombie (killed, not yet reaped) as gone", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    // A real process killed with SIGKILL whose parent never waits for it: `sleep 120` (exec'd
    // by the shell) is the parent of `sleep 60` and never reaps it, so the killed one stays a
    // zombie; its pid answers signal 0, and /proc says Z.
    const child = spawn("sh", ["-c", "sleep 60 & echo $!; exec sleep 120"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    try {
      const [line] = (await once(child.stdout, "data")) as [Buffer];
      const pid = Number(line.toString().trim());
      const path = join(root, "store");
      await (await openEmbeddedUploadStore({ ...limits, path })).close();
      await writeFile(join(path, "lock"), JSON.stringify({ pid, host: hostname() }));
      process.kill(pid, "SIGKILL");
      await waitFor(async () => (await readFile(`/proc/${pid}/stat`, "utf8")).includes(") Z "));
      const store = await openEmbeddedUploadStore({ ...limits, path });
      await store.close();
    } finally {
      child.kill("SIGKILL");
      await rm(root, { recursive: true, force: true });
    }
  });

  it("belongs to one service, and refuses another naming both", async () => {
    await withStorePath(async (path) => {
      await (
        await openEmbeddedUploadStore({ ...limits, path, service: "config:/etc/a.yml" })
      ).close();
      // The same service opens it again.
      await (
        await openEmbeddedUploadStore({ ...limits, path, service: "config:/etc/a.yml" })
      ).close();
      await expect(
        openEmbeddedUploadStore({ ...limits, path, service: "config:/etc/b.yml" }),
      ).rejects.toThrow(
        `upload store ${path} belongs to service "config:/etc/a.yml", not "config:/etc/b.yml"`,
      );
      // The refusal released the store's lock: its own service still opens it.
      await (
        await openEmbeddedUploadStore({ ...limits, path, service: "config:/etc/a.yml" })
      ).close();
    });
  });

  it("refuses to start on a record of the earlier layout it cannot read, naming the file", async () => {
    await withStorePath(async (path) => {
      await mkdir(join(path, "runs"), { recursive: true, mode: 0o700 });
      await writeFile(join(path, "runs", "broken.json"), "not json");
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        /upload store record .*broken\.json is not JSON/,
      );
    });
  });

  it("refuses a run record that is not the wire record it would be served as, naming the field", async () => {
    await withStorePath(async (path) => {
      const store = await openEmbeddedUploadStore({ ...limits, path });
      await enqueueSample(store);
      await store.close();
      const file = join(path, "records.log");
      const [header, line] = (await readFile(file, "utf8")).trimEnd().split("\n");
      const body = JSON.parse(line ?? "");
      body.run.record.manifest.digest = 7;
      await writeFile(file, `${header}\n${JSON.stringify(body)}\n`);
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        `upload store record ${file} line 2 is not a whole change: run: record: manifest.digest must be a string, got 7`,
      );
    });
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Runs `test` with the path of a store in a fresh temporary directory, removed after. */
async function withStorePath(test: (path: string) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
  try {
    await test(join(root, "store"));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Queues a sample run without an idempotency key. */
async function enqueueSample(store: UploadStore): Promise<ReturnType<typeof sampleRun>> {
  const sample = sampleRun();
  await store.reserveQueueSlot();
  await store.enqueue(sample.run, sample.job, sample.accepted, undefined);
  return sample;
}
