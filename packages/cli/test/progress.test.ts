import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../src/main.js";
import { REPORT, useTempDir, writeConfig, writeSpecBundle } from "./helpers.js";

const tmp = useTempDir();

// A pseudo-terminal is not available to a spawned child here, so progress is checked in-process
// with an stderr that claims to be a terminal; the process tests cover the non-TTY case (no
// progress, clean stderr).
async function runWithStderr(isTTY: boolean) {
  const source = join(tmp(), "src");
  const dest = join(tmp(), isTTY ? "tty" : "pipe");
  await writeSpecBundle(source);
  const configPath = await writeConfig(tmp(), source, dest);
  let stdout = "";
  let stderr = "";
  const code = await main(["run", "--config", configPath], {
    stdout: { write: (chunk: string) => (stdout += chunk) },
    stderr: { write: (chunk: string) => (stderr += chunk) },
    stderrIsTTY: isTTY,
  });
  expect(await readFile(join(dest, "report.md"), "utf8")).toBe(REPORT);
  return { code, stdout, stderr };
}

describe("run progress", () => {
  it("draws files and bytes on an interactive stderr, never on stdout", async () => {
    const { code, stdout, stderr } = await runWithStderr(true);
    expect(code).toBe(0);
    expect(stderr).toContain("publishing reports/archive: 1 file, 16 B");
    expect(stdout).not.toContain("publishing");
  });

  it("stays silent when stderr is not a terminal", async () => {
    const { code, stderr } = await runWithStderr(false);
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });
});
