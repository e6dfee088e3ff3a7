import { spawn } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import {
  BIN,
  type CliResult,
  resultOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  useTempDir,
  writeBundle,
} from "./helpers.js";

// A real `distributor run` stopped (SIGSTOP) past its lease while it overwrites a bundle in place,
// a newer run committing meanwhile, then continued (SIGCONT): the stalled run must not report a
// success the destination contradicts, the newer run's state must describe every byte, and the
// next plain run succeeds and leaves no lease or temp file (docs/design/commit-protocol.md, fencing).

const tmp = useTempDir();

/** Lease lifetime for these runs (test-only `DISTRIBUTOR_LEASE_TTL_MS`, read by `run`). */
const TTL_MS = 2000;
const ENV = { DISTRIBUTOR_LEASE_TTL_MS: String(TTL_MS) };
const COUNT = 400;
const SIZE = 4096;
const FIRST = "data/000.txt";
const LAST = `data/${String(COUNT - 1).padStart(3, "0")}.txt`;

/** Every file of one version: `COUNT` files of `SIZE` bytes, each starting with the version's tag. */
function version(tag: string): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: COUNT }, (_, i) => {
      const head = `${tag} ${i} `;
      return [`data/${String(i).padStart(3, "0")}.txt`, `${head.padEnd(SIZE - 1, tag)}\n`];
    }),
  );
}

/** A CLI process the test can stop, continue and wait for. */
function spawnCli(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  let exited = false;
  const done = new Promise<CliResult>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      exited = true;
      resolve({ code, stdout, stderr });
    });
  });
  return {
    done,
    exited: () => exited,
    signal: (signal: NodeJS.Signals) => child.kill(signal),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `promise`, or a failure naming `what` once `ms` have passed. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Every file below `root` (relative path → sha256), leases and temp files included. */
async function digests(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else found[relative(root, path)] = sha256Of(await readFile(path));
    }
  };
  await visit(root);
  return found;
}

interface State {
  source: { manifest: { digest: string; created: string } };
  outputs: Array<{ path: string; sha256: string; size: number }>;
}

const readState = async (dest: string): Promise<State> =>
  JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));

/**
 * Every file at the destination holds the bytes its state record names, and nothing else lies
 * there: no lease, no temp file, nothing unrecorded.
 */
async function expectAgreement(dest: string, label: string): Promise<State> {
  const state = await readState(dest);
  const onDisk = await digests(dest);
  delete onDisk[".distributor.json"];
  expect(onDisk, label).toEqual(Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256])));
  return state;
}

/** How many of the bundle's files hold the bytes of version `tag`. */
async function holding(dest: string, tag: string): Promise<number> {
  let count = 0;
  for (const path of Object.keys(version("v1"))) {
    const head = await readFile(join(dest, path), "utf8").catch(() => "");
    if (head.startsWith(`${tag} `)) count += 1;
  }
  return count;
}

/**
 * One try of the scenario; false when the stalled run could not be caught part-way through its
 * overwrites (it finished first, or every file held V2 by the time it stopped), so that the
 * caller tries again on a fresh destination.
 */
async function scenario(dir: string): Promise<boolean> {
  const dest = join(dir, "dest");
  const configs: Record<string, string> = {};
  const manifests: Record<string, { digest: string; created: string }> = {};
  for (const [hour, tag] of ["v1", "v2", "v3"].entries()) {
    const source = join(dir, `src-${tag}`);
    await writeBundle(source, "reports", `2026-06-04T0${hour + 1}:00:00Z`, version(tag));
    manifests[tag] = JSON.parse(await readFile(join(source, "manifest.json"), "utf8"));
    configs[tag] = join(dir, `${tag}.yml`);
    await writeFile(configs[tag], singlePipelineConfig(source, dest));
  }
  // Only the run that is stopped needs the short lease: the others keep the default, so that a
  // loaded machine cannot make them lose theirs.
  const run = (tag: string) =>
    runCli(["run", "--config", configs[tag] as string, "--format", "json"]);

  const v1 = await run("v1");
  expect(v1.code, v1.stderr).toBe(0);

  // V2 changes every file: each is overwritten in place, a compare-and-swap on V1's version.
  const stalled = spawnCli(["run", "--config", configs.v2 as string, "--format", "json"], ENV);
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (stalled.exited()) return false;
      const first = await readFile(join(dest, FIRST), "utf8").catch(() => "");
      const last = await readFile(join(dest, LAST), "utf8").catch(() => "");
      if (first.startsWith("v2 ") && last.startsWith("v1 ")) break;
      if (Date.now() > deadline) throw new Error("the V2 run never started overwriting");
      await sleep(2);
    }
    stalled.signal("SIGSTOP");
    const written = await holding(dest, "v2");
    if (stalled.exited() || written === COUNT) {
      stalled.signal("SIGCONT");
      await stalled.done;
      return false;
    }
    expect(written).toBeGreaterThan(0);

    // Past its lease: the lease file says until when (renewals stopped with the process); a
    // second after that, or TTL + 1 s should it be unreadable.
    const expiry = await readFile(join(dest, ".distributor.lease.json"), "utf8").then(
      (text) => Date.parse((JSON.parse(text) as { expires_at: string }).expires_at),
      () => Date.now() + TTL_MS,
    );
    await sleep(Math.max(0, expiry - Date.now()) + 1000);

    // A newer run breaks the stale lease, recovers what the stalled run left, and commits V3.
    const newer = await run("v3");
    expect(newer.code, `${newer.stdout}\n${newer.stderr}`).toBe(0);
    const [committed] = resultOf(newer).actions as Array<{ action: string; status: string }>;
    expect(committed?.status).toBe("published");
    await expectAgreement(dest, "after the newer run");

    stalled.signal("SIGCONT");
    const resumed = await within(stalled.done, 30_000, "the continued run did not exit");
    const after = await expectAgreement(
      dest,
      `after the stalled run went on (exit ${resumed.code}): ${resumed.stdout} ${resumed.stderr}`,
    );
    // Whatever it reported, it changed nothing the newer state describes.
    expect(after.source.manifest.digest).toBe(manifests.v3?.digest);
    for (const output of after.outputs) {
      expect(output.sha256, output.path).toBe(sha256Of(version("v3")[output.path] as string));
    }
    expect(after.outputs).toHaveLength(COUNT);
    if (resumed.code === 0) {
      // It may report success only for what holds: V3 is newer than V2, so at most a skip.
      const [action] = resultOf(resumed).actions as Array<{ action: string; status: string }>;
      expect(action?.status, resumed.stdout).toBe("skipped");
    } else {
      expect(resumed.code, resumed.stderr).toBe(1);
    }

    // The next plain run succeeds and leaves state and bytes in agreement, without debris.
    const next = await run("v3");
    expect(next.code, `${next.stdout}\n${next.stderr}`).toBe(0);
    const final = await expectAgreement(dest, "after the next plain run");
    expect(final.source.manifest.digest).toBe(manifests.v3?.digest);
    return true;
  } finally {
    if (!stalled.exited()) {
      stalled.signal("SIGCONT");
      stalled.signal("SIGKILL");
      await stalled.done;
    }
  }
}

describe("a run stopped past its lease while it overwrites in place", () => {
  it("cannot change what the newer run committed; the next plain run succeeds", async () => {
    // On a loaded machine the V2 run may finish between two looks: try again, a few times.
    for (let attempt = 1; ; attempt++) {
      const dir = join(tmp(), `attempt-${attempt}`);
      if (await scenario(dir)) return;
      if (attempt === 3) throw new Error("three tries never caught the V2 run part-way through");
    }
  }, 60_000);

  it("takes its lease lifetime only as a positive whole number of milliseconds", async () => {
    const result = await runCli(["run", "--config", join(tmp(), "distributor.yml")], {
      env: { DISTRIBUTOR_LEASE_TTL_MS: "2s" },
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'DISTRIBUTOR_LEASE_TTL_MS must be a positive whole number of milliseconds, got "2s"',
    );
  });
});
