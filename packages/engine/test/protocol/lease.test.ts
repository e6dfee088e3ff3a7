import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { ownerScope, serializeDocument } from "@distributor/state";
import { LEASE_FILE_NAME, type StorageBackend } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquireLease } from "../../src/protocol/acquire-lease.js";
import { holdLease } from "../../src/protocol/hold-lease.js";
import {
  defaultProcessAlive,
  type LeaseDocument,
  LeaseHeldError,
  LeaseLostError,
  parseLease,
  serializeLease,
} from "../../src/protocol/lease-file.js";
import { recoverJournal } from "../../src/protocol/recovery.js";
import {
  BACKEND_KINDS,
  exists,
  manifestFor,
  newBackend,
  readText,
  removeTempBackends,
  singleOwnerState,
  useBackendKind,
} from "../../src/testing/fixtures.js";

const OWNER = ownerScope("reports", "archive");
const OTHER = ownerScope("other", "site");

/** A pid that certainly ran on this host and is gone now. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}

function leaseDocument(overrides: Partial<LeaseDocument> = {}): LeaseDocument {
  return {
    format: "distributor-lease/1",
    owner: { pipeline_id: "other", destination_id: "site" },
    run_id: "11111111-2222-4333-8444-555555555555",
    host: "elsewhere.example",
    pid: 4242,
    acquired_at: new Date(Date.now() - 1000).toISOString(),
    expires_at: new Date(Date.now() + 60_000).toISOString(),
    journal: [],
    directories: [""],
    ...overrides,
  };
}

async function writeLease(backend: StorageBackend, bundlePath: string, lease: LeaseDocument) {
  const path = bundlePath === "" ? LEASE_FILE_NAME : `${bundlePath}/${LEASE_FILE_NAME}`;
  await backend.writeFile(path, JSON.stringify(lease), { overwrite: true });
}

async function leaseOf(backend: StorageBackend, bundlePath = "site"): Promise<LeaseDocument> {
  const lease = parseLease(await readText(backend, `${bundlePath}/${LEASE_FILE_NAME}`));
  if (lease === undefined) throw new Error("no readable lease");
  return lease;
}

describe.each(BACKEND_KINDS)("%s: leases", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);

  it("is created beside the state, naming owner, run, host, pid and expiry, and released", async () => {
    const backend = newBackend();
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    const stored = await leaseOf(backend);
    expect(stored).toMatchObject({
      owner: { pipeline_id: "reports", destination_id: "archive" },
      run_id: lease.runId,
      host: hostname(),
      pid: process.pid,
      journal: [],
    });
    expect(Date.parse(stored.expires_at)).toBeGreaterThan(Date.now());
    await lease.release();
    expect(await exists(backend, `site/${LEASE_FILE_NAME}`)).toBe(false);
  });

  it("refuses a live lease of another run at once, naming the holder", async () => {
    const backend = newBackend();
    const held = leaseDocument();
    await writeLease(backend, "site", held);
    const error = await acquireLease(backend, "site", OWNER, { renew: false }).catch((e) => e);
    expect(error).toBeInstanceOf(LeaseHeldError);
    expect(error.message).toContain(`run ${held.run_id} of other/site`);
    expect(error.message).toContain("host elsewhere.example (pid 4242)");
    expect(error.message).toContain(`until ${held.expires_at}`);
    expect((await leaseOf(backend)).run_id).toBe(held.run_id);
  });

  it("waits up to the lock timeout for a live lease to be released", async () => {
    const backend = newBackend();
    const first = await acquireLease(backend, "site", OTHER, { renew: false });
    setTimeout(() => void first.release(), 300);
    const started = Date.now();
    const second = await acquireLease(backend, "site", OWNER, {
      lockTimeoutMs: 5000,
      renew: false,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect((await leaseOf(backend)).run_id).toBe(second.runId);
    await second.release();

    const third = await acquireLease(backend, "site", OTHER, { renew: false });
    const timedOut = await acquireLease(backend, "site", OWNER, {
      lockTimeoutMs: 300,
      renew: false,
    }).catch((e) => e);
    expect(timedOut).toBeInstanceOf(LeaseHeldError);
    expect(timedOut.message).toContain("after waiting 300ms");
    await third.release();
  });

  it("breaks an expired lease and hands its journal over for recovery", async () => {
    const backend = newBackend();
    const stale = leaseDocument({
      expires_at: new Date(Date.now() - 1).toISOString(),
      journal: ["new.txt"],
      directories: ["", "docs"],
    });
    await writeLease(backend, "site", stale);
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    expect(lease.broken?.journal).toEqual(["new.txt"]);
    expect(lease.broken?.directories).toEqual(["", "docs"]);
    // The journal is carried into the new lease until recovery clears it.
    expect((await leaseOf(backend)).journal).toEqual(["new.txt"]);
    await lease.release();
  });

  it("breaks an unexpired lease of a process of this host that is gone (restic's rule)", async () => {
    const backend = newBackend();
    await writeLease(backend, "site", leaseDocument({ host: hostname(), pid: deadPid() }));
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    expect(lease.broken).toBeDefined();
    await lease.release();
  });

  it("lets exactly one of two runs break the same stale lease", async () => {
    const backend = newBackend();
    await writeLease(backend, "site", leaseDocument({ host: hostname(), pid: deadPid() }));
    const outcomes = await Promise.allSettled([
      acquireLease(backend, "site", OWNER, { renew: false }),
      acquireLease(backend, "site", OTHER, { renew: false }),
    ]);
    const won = outcomes.filter((o) => o.status === "fulfilled");
    expect(won).toHaveLength(1);
    const lost = outcomes.find((o) => o.status === "rejected");
    expect(lost?.status === "rejected" && lost.reason).toBeInstanceOf(LeaseHeldError);
    if (won[0]?.status === "fulfilled") await won[0].value.release();
  });

  it("renews its expiry while held, and notices when another run took it over", async () => {
    const backend = newBackend();
    const lease = await acquireLease(backend, "site", OWNER, { ttlMs: 600 });
    const first = Date.parse((await leaseOf(backend)).expires_at);
    await new Promise((resolve) => setTimeout(resolve, 450));
    expect(Date.parse((await leaseOf(backend)).expires_at)).toBeGreaterThan(first);

    const intruder = leaseDocument();
    await writeLease(backend, "site", intruder);
    await new Promise((resolve) => setTimeout(resolve, 450));
    expect(() => lease.assertHeld()).toThrow(LeaseLostError);
    await lease.release();
    // Release never removes another run's lease.
    expect((await leaseOf(backend)).run_id).toBe(intruder.run_id);
  });

  it("stops the run's writes when a renewal fails, aborting its signal", async () => {
    const inner = newBackend();
    let failing = false;
    const backend = new Proxy(inner, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === "writeFile") {
          return async (...args: Parameters<StorageBackend["writeFile"]>) => {
            if (failing) throw new Error("store unreachable");
            return target.writeFile(...args);
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const lease = await acquireLease(backend, "site", OWNER, { ttlMs: 600 });
    expect(lease.signal.aborted).toBe(false);
    failing = true;
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(lease.signal.aborted).toBe(true);
    expect(() => lease.assertHeld()).toThrow(/could not be renewed: store unreachable/);
    await lease.release();
  });

  it("stops the run's writes once too little of the lease is left by its clock", async () => {
    const backend = newBackend();
    const clock = { offset: 0 };
    const now = () => new Date(Date.now() + clock.offset);
    const lease = await acquireLease(backend, "site", OWNER, { renew: false, now });
    lease.assertHeld();
    // A stall: the process wakes up 50 s later by its own clock, 10 s before the expiry.
    clock.offset += 50_000;
    expect(() => lease.assertHeld()).toThrow(/about to expire without a renewal/);
    expect(lease.signal.aborted).toBe(true);
    await lease.release();
  });

  it("resolves a renewal whose answer was lost by reading the lease back", async () => {
    const inner = newBackend();
    let loseNext = false;
    const backend = new Proxy(inner, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === "writeFile") {
          return async (...args: Parameters<StorageBackend["writeFile"]>) => {
            const result = await target.writeFile(...args);
            if (loseNext) {
              loseNext = false;
              throw new Error("connection reset after the request was sent");
            }
            return result;
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    loseNext = true;
    await lease.confirm();
    // The next compare-and-swap uses the version read back, so it is not taken for a takeover.
    await lease.journal(["a.txt"], [""]);
    lease.assertHeld();
    expect((await leaseOf(inner)).journal).toEqual(["a.txt"]);
    await lease.release();
    expect(await exists(inner, `site/${LEASE_FILE_NAME}`)).toBe(false);
  });

  it("releases only its own lease: one taken over since stays", async () => {
    const backend = newBackend();
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    const successor = leaseDocument({ run_id: "99999999-2222-4333-8444-555555555555" });
    await writeLease(backend, "site", successor);
    await lease.release();
    expect((await leaseOf(backend)).run_id).toBe(successor.run_id);
  });

  it("leaves an abandoned lease expired, journaling what is left to delete", async () => {
    const backend = newBackend();
    const lease = await acquireLease(backend, "site", OWNER, { renew: false });
    await lease.journal(["a.txt", "old.txt"], [""]);
    await lease.abandon(["old.txt"]);
    const left = await leaseOf(backend);
    expect(left.journal).toEqual(["old.txt"]);
    expect(Date.parse(left.expires_at)).toBeLessThanOrEqual(Date.now());
    const next = await acquireLease(backend, "site", OWNER, { renew: false });
    expect(next.broken?.journal).toEqual(["old.txt"]);
    await next.release();
  });
});

describe("a lease holder that is a zombie", () => {
  it("counts as gone: killed, not yet reaped, its pid still answers signal 0", async () => {
    // `sleep 0.1` becomes the child of a process (exec'd `sleep 5`) that never reaps it.
    const child = spawn("sh", ["-c", "sleep 0.1 & echo $!; exec sleep 5"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    try {
      const pid = await new Promise<number>((resolve) =>
        child.stdout.once("data", (data: Buffer) => resolve(Number(data.toString().trim()))),
      );
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(() => process.kill(pid, 0)).not.toThrow();
      expect(readFileSync(`/proc/${pid}/stat`, "utf8")).toMatch(/\) Z /);
      expect(defaultProcessAlive(pid)).toBe(false);
      expect(defaultProcessAlive(process.pid)).toBe(true);
      expect(defaultProcessAlive(deadPid())).toBe(false);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe.each(BACKEND_KINDS)("%s: recovery", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);

  const state = (outputs: string[]) =>
    serializeDocument(
      singleOwnerState(manifestFor(Object.fromEntries(outputs.map((path) => [path, "x"])))),
    );

  it("deletes journaled paths no state records and temp files, and nothing else", async () => {
    const backend = newBackend({
      files: {
        "site/.distributor.json": state(["kept.txt"]),
        "site/kept.txt": "recorded",
        "site/created.txt": "from the dead run",
        "site/docs/created.md": "from the dead run",
        "site/docs/.distributor.0123456789abcdef.tmp": "partial",
        "site/.distributor.abcdefabcdef0123.tmp": "partial state",
        "site/unmanaged.txt": "placed by hand",
        "site/docs/.report.0123456789ab.tmp": "a user's file that merely looks like a temp file",
        "elsewhere/.distributor.0123456789abcdef.tmp": "another directory",
      },
    });
    const report = await recoverJournal(backend, "site", {
      journal: ["kept.txt", "created.txt", "docs/created.md", "never-written.txt"],
      directories: ["", "docs"],
    });
    expect(report.deleted.sort()).toEqual(["created.txt", "docs/created.md", "never-written.txt"]);
    expect(report.kept).toEqual(["kept.txt"]);
    expect(report.tempFiles.sort()).toEqual([
      ".distributor.abcdefabcdef0123.tmp",
      "docs/.distributor.0123456789abcdef.tmp",
    ]);
    const left = (await backend.walk("", { recursive: true, limit: 100 }))
      .filter((entry) => entry.kind === "file")
      .map((entry) => entry.path);
    expect(left).toEqual([
      "elsewhere/.distributor.0123456789abcdef.tmp",
      "site/.distributor.json",
      "site/docs/.report.0123456789ab.tmp",
      "site/kept.txt",
      "site/unmanaged.txt",
    ]);
  });

  it("deletes nothing journaled when the state cannot be read", async () => {
    const backend = newBackend({
      files: { "site/.distributor.json": "{ broken", "site/created.txt": "x" },
    });
    const report = await recoverJournal(backend, "site", {
      journal: ["created.txt"],
      directories: [""],
    });
    expect(report.deleted).toEqual([]);
    expect(report.kept).toEqual(["created.txt"]);
    expect(await exists(backend, "site/created.txt")).toBe(true);
  });

  it("takes over and recovers a stale lease as large as a lease may be read back", async () => {
    const backend = newBackend({ files: { "site/created.txt": "x" } });
    // A dead run's lease just below 16 MiB (as a version without the journal's headroom could
    // leave), its journal listing long paths that were never written.
    const limit = 16 * 1024 * 1024;
    const long = (index: number) =>
      `${"d".repeat(200)}/${"e".repeat(200)}/${"f".repeat(200)}/${index}`;
    const dead = leaseDocument({ expires_at: new Date(0).toISOString(), journal: ["created.txt"] });
    let size = serializeLease(dead).length;
    while (size + long(dead.journal.length).length + 8 < limit - 100) {
      const path = long(dead.journal.length);
      dead.journal.push(path);
      size += path.length + 8;
    }
    const text = serializeLease(dead);
    expect(text.length).toBeGreaterThan(limit - 1_000);
    expect(text.length).toBeLessThanOrEqual(limit);
    await backend.writeFile(`site/${LEASE_FILE_NAME}`, text, { overwrite: true });
    // The new holder's longer ids make the takeover larger than the dead lease; it is taken anyway.
    const owner = ownerScope("p".repeat(128), "d".repeat(128));
    const lease = await holdLease(backend, "site", owner, { renew: false });
    expect(await exists(backend, "site/created.txt")).toBe(false);
    expect((await leaseOf(backend)).journal).toEqual([]);
    await lease.release();
    expect(await exists(backend, `site/${LEASE_FILE_NAME}`)).toBe(false);
  });

  it("holdLease recovers a stale lease, then empties its journal", async () => {
    const backend = newBackend({ files: { "site/created.txt": "x" } });
    await writeLease(
      backend,
      "site",
      leaseDocument({ expires_at: new Date(0).toISOString(), journal: ["created.txt"] }),
    );
    const recovered: string[][] = [];
    const lease = await holdLease(backend, "site", OWNER, {
      renew: false,
      onRecovered: (report) => recovered.push(report.deleted),
    });
    expect(recovered).toEqual([["created.txt"]]);
    expect(await exists(backend, "site/created.txt")).toBe(false);
    expect((await leaseOf(backend)).journal).toEqual([]);
    await lease.release();
  });

  it("keeps the dead run's journal when recovery itself fails", async () => {
    const backend = newBackend({ files: { "site/created.txt": "x" } });
    await writeLease(
      backend,
      "site",
      leaseDocument({ expires_at: new Date(0).toISOString(), journal: ["created.txt"] }),
    );
    const failing = new Proxy(backend, {
      get(target, property) {
        if (property === "deletePaths") {
          return async () => {
            throw new Error("disk went read-only");
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    await expect(holdLease(failing, "site", OWNER, { renew: false })).rejects.toThrow(
      "disk went read-only",
    );
    const left = await leaseOf(backend);
    expect(left.journal).toEqual(["created.txt"]);
    expect(Date.parse(left.expires_at)).toBeLessThanOrEqual(Date.now());

    const lease = await holdLease(backend, "site", OWNER, { renew: false });
    expect(await exists(backend, "site/created.txt")).toBe(false);
    await lease.release();
  });
});
