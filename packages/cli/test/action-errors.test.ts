import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rmdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { envelopeOf, runCli, useTempDir, writeBundle, writeConfig } from "./helpers.js";

const exec = promisify(execFile);

/** Whether this process may mount a tmpfs (root in a container that allows it). */
async function canMount(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false;
  const probe = await mkdtemp(join(tmpdir(), "distributor-mount-probe-"));
  try {
    await exec("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]);
    await exec("umount", [probe]);
    return true;
  } catch {
    return false;
  } finally {
    await rmdir(probe).catch(() => undefined);
  }
}

const mountable = await canMount();

// Real filesystem failures under a real CLI process: a destination on a full tmpfs and one on a
// read-only tmpfs. Each failed action names its cause by a documented code; the envelope keeps
// `destination_failed`.
describe.skipIf(!mountable)("run --format json: error codes of failed actions", () => {
  const dir = useTempDir();
  const mounted: string[] = [];

  beforeAll(() => {
    if (!mountable) console.warn("skipping: cannot mount a tmpfs here (needs root)");
  });
  afterEach(async () => {
    for (const point of mounted.splice(0)) await exec("umount", [point]).catch(() => undefined);
  });

  const destinationOn = async (options: string) => {
    const dest = join(dir(), "dest");
    await mkdir(dest);
    await exec("mount", ["-t", "tmpfs", "-o", options, "tmpfs", dest]);
    mounted.push(dest);
    return dest;
  };

  const runJson = async (dest: string) => {
    await writeBundle(join(dir(), "src", "big"), "reports.big", "2026-06-04T11:55:00Z", {
      "blob.bin": "x".repeat(512 * 1024),
    });
    const config = await writeConfig(dir(), join(dir(), "src"), dest);
    return runCli(["run", "--config", config, "--format", "json"]);
  };

  it("reports no_space when the destination's filesystem is full", async () => {
    const dest = await destinationOn("size=128k");
    const result = await runJson(dest);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("destination_failed");
    const [action] = (envelope.result as { actions: { status: string; error: unknown }[] }).actions;
    expect(action?.status).toBe("failed");
    expect(action?.error).toEqual({
      code: "no_space",
      message: expect.stringContaining("ENOSPC"),
    });
  });

  it("reports read_only when the destination's filesystem is mounted read-only", async () => {
    const dest = await destinationOn("ro,size=128k");
    const result = await runJson(dest);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("destination_failed");
    const [action] = (envelope.result as { actions: { error: unknown }[] }).actions;
    expect(action?.error).toEqual({
      code: "read_only",
      message: expect.stringContaining("EROFS"),
    });
  });

  it("prints the message, not the code object, on stderr in text mode", async () => {
    const dest = await destinationOn("ro,size=128k");
    await writeBundle(join(dir(), "src", "big"), "reports.big", "2026-06-04T11:55:00Z", {
      "a.txt": "a\n",
    });
    const config = await writeConfig(dir(), join(dir(), "src"), dest);
    const result = await runCli(["run", "--config", config]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^distributor: pipeline reports destination archive bundle big: .*EROFS/m,
    );
    expect(result.stderr).not.toContain("[object Object]");
  });
});
