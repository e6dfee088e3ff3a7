import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, FIXTURES, useTempDir, writeSpecBundle } from "./helpers.js";

const register = join(FIXTURES, "load-trace", "register.mjs");

/** Runs the CLI recording every module it loads. */
async function loadedModules(args: readonly string[], traceFile: string): Promise<string[]> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", register, BIN, ...args], {
      env: { ...process.env, LOAD_TRACE_FILE: traceFile },
      stdio: "ignore",
    });
    child.on("error", reject);
    child.on("close", () => resolve());
  });
  return (await readFile(traceFile, "utf8")).trim().split("\n");
}

const workspaceModule = (name: string) => (url: string) => url.includes(`/packages/${name}/`);

describe("startup", () => {
  const dir = useTempDir();

  it("loads no workflow code for --help", async () => {
    const modules = await loadedModules(["--help"], join(dir(), "trace"));

    expect(modules.some((url) => url.includes("/yargs/"))).toBe(true);
    for (const name of ["publish", "bundle", "state", "storage", "upload-client"]) {
      expect(modules.filter(workspaceModule(name))).toEqual([]);
    }
    expect(modules.some((url) => url.endsWith("/handlers/validate.js"))).toBe(false);
    expect(modules.filter(workspaceModule("storage-ssh"))).toEqual([]);
    expect(modules.filter((url) => url.includes("/node_modules/ssh2"))).toEqual([]);
  });

  it("loads neither the S3 adapter nor the AWS SDK for --help", async () => {
    const modules = await loadedModules(["--help"], join(dir(), "trace"));

    expect(modules.filter(workspaceModule("storage-s3"))).toEqual([]);
    expect(modules.filter((url) => url.includes("/@aws-sdk/"))).toEqual([]);
  });

  it("loads the workflows once a command needs them", async () => {
    await writeSpecBundle(join(dir(), "bundle"));

    const modules = await loadedModules(["validate", join(dir(), "bundle")], join(dir(), "trace"));

    expect(modules.some(workspaceModule("publish"))).toBe(true);
  });
});
