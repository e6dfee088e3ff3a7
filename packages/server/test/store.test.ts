import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openEmbeddedUploadStore } from "../src/store/embedded-store.js";
import { createMemoryUploadStore } from "../src/store/memory-store.js";
import { describeUploadStoreContract, sampleRun } from "../src/testing/index.js";

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

  it("keeps one private file per run and per key, and removes interrupted writes", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
      const store = await openEmbeddedUploadStore({ ...limits, path });
      const sample = sampleRun();
      await store.reserveQueueSlot();
      const scope = { tokenId: "reporter", pipelineId: "reports", key: "k" };
      await store.claimKey(scope);
      await store.enqueue(sample.run, sample.job, sample.accepted, scope);
      expect(await readdir(join(path, "runs"))).toEqual([`${sample.runId}.json`]);
      expect(await readdir(join(path, "keys"))).toHaveLength(1);
      // What a write interrupted by kill -9 leaves: a temporary file, and a key without its run.
      await writeFile(join(path, "runs", `.x.json.abc.tmp`), '{"trunc');
      await writeFile(
        join(path, "keys", "dangling.json"),
        JSON.stringify({
          format: "distributor-upload-key/1",
          token_id: "reporter",
          pipeline_id: "reports",
          key: "lost",
          run_id: "never-written",
          accepted: {},
        }),
      );
      await store.close();
      const again = await openEmbeddedUploadStore({ ...limits, path });
      expect(await readdir(join(path, "runs"))).toEqual([`${sample.runId}.json`]);
      expect((await again.recover()).map((job) => job.runId)).toEqual([sample.runId]);
      expect(await again.claimKey({ ...scope, key: "lost" })).toEqual({ kind: "claimed" });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("keeps every record of many concurrent writes sharing directory flushes", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
      const wide = { queueSize: 40, retentionMs: 60_000, maxRuns: 100 };
      const store = await openEmbeddedUploadStore({ ...wide, path });
      const samples = Array.from({ length: 40 }, () => sampleRun());
      // Every write starts before any resolves: most wait for a directory flush another began.
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
      await store.close();
      const again = await openEmbeddedUploadStore({ ...wide, path });
      expect((await readdir(join(path, "runs"))).sort()).toEqual(
        samples.map((sample) => `${sample.runId}.json`).sort(),
      );
      expect(await readdir(join(path, "keys"))).toHaveLength(samples.length);
      for (const sample of samples) {
        expect((await again.getRun(sample.runId))?.record.status).toBe("running");
      }
      await again.close();
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("allows one open store per directory while its holder lives", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
      const store = await openEmbeddedUploadStore({ ...limits, path });
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        `upload store ${path} is in use by process ${process.pid}`,
      );
      await store.close();
      // A holder that no longer runs is replaced.
      await writeFile(join(path, "lock"), JSON.stringify({ pid: 2 ** 22 + 1, host: hostname() }));
      await (await openEmbeddedUploadStore({ ...limits, path })).close();
    } finally {
      await rm(root, { recursive: true, force: true });
    }
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
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
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
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("refuses to start on a record it cannot read, naming the file", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
      await (await openEmbeddedUploadStore({ ...limits, path })).close();
      await writeFile(join(path, "runs", "broken.json"), "not json");
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        /upload store record .*broken\.json is not JSON/,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("refuses a run record that is not the wire record it would be served as, naming the field", async () => {
    const root = await mkdtemp(join(tmpdir(), "distributor-store-"));
    try {
      const path = join(root, "store");
      const store = await openEmbeddedUploadStore({ ...limits, path });
      const sample = sampleRun();
      await store.reserveQueueSlot();
      await store.enqueue(sample.run, sample.job, sample.accepted, undefined);
      await store.close();
      const file = join(path, "runs", `${sample.runId}.json`);
      const body = JSON.parse(await readFile(file, "utf8"));
      body.record.manifest.digest = 7;
      await writeFile(file, JSON.stringify(body));
      await expect(openEmbeddedUploadStore({ ...limits, path })).rejects.toThrow(
        `${sample.runId}.json is an incomplete distributor-upload-run/1 record: record: manifest.digest must be a string, got 7`,
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
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
