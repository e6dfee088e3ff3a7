import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../src/main.js";
import {
  BIN,
  REPORT,
  runCli,
  useTempDir,
  writeBundle,
  writeConfig,
  writeFiles,
  writeSpecBundle,
} from "./helpers.js";

const tmp = useTempDir();
const ERASE = "\r\u001b[K";
const FILES = 400;
const FILE_SIZE = 32 * 1024;

const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * Runs the CLI under a pseudo-terminal with util-linux `script`, stdin not a terminal: stdout and
 * stderr both reach the terminal, whose output (the two interleaved) comes back as `output`, and
 * `script -e` passes the CLI's exit status through. `redirect` is shell text appended to the
 * command (e.g. `2>file`, for a stderr that is not a terminal).
 */
function runInTerminal(
  args: readonly string[],
  redirect = "",
): Promise<{ code: number | null; output: string }> {
  const command = `stty cols 200 2>/dev/null; exec ${[process.execPath, BIN, ...args].map(quote).join(" ")} ${redirect}`;
  return new Promise((resolve, reject) => {
    const child = spawn("script", ["-qefc", command, "/dev/null"], {
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.stderr.resume();
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

/** A bundle of FILES files of FILE_SIZE bytes each, and a config publishing it to `dest`. */
async function largeBundle(): Promise<{ configPath: string; dest: string }> {
  const source = join(tmp(), "src");
  const dest = join(tmp(), "dest");
  const files: Record<string, string> = {};
  for (let i = 0; i < FILES; i++) {
    files[`data/${String(i).padStart(3, "0")}.txt`] = `${i}\n`.padEnd(FILE_SIZE, "x");
  }
  await writeBundle(source, "reports.large", "2026-06-04T11:55:00Z", files);
  return { configPath: await writeConfig(tmp(), source, dest), dest };
}

describe.skipIf(process.platform !== "linux")("run progress on a pseudo-terminal", () => {
  it("draws the phases with percentages on stderr and ends with a summary line", async () => {
    const { configPath, dest } = await largeBundle();
    const { code, output } = await runInTerminal(["run", "--config", configPath]);

    expect(code).toBe(0);
    expect((await readdir(join(dest, "data"))).length).toBe(FILES);
    expect(output).toContain(`${ERASE}validating reports: 0/${FILES} files, 0 B/12.5 MiB, 0%`);
    const drawn = output.split(ERASE);
    expect(drawn).toContainEqual(
      expect.stringMatching(
        /^publishing reports\/archive: \d+\/400 files, [\d.]+ (B|KiB|MiB)\/12\.5 MiB, \d+%/,
      ),
    );
    expect(drawn).toContainEqual(
      expect.stringMatching(/^published 400 files, 12\.5 MiB in \d+\.\d s \([\d.]+ \w+\/s\)\r\n/),
    );
    expect(output).toContain("action=publish_new status=published outputs=400");

    // Nothing to write: no phase is drawn, and the summary says why.
    const again = await runInTerminal(["run", "--config", configPath]);
    expect(again.code).toBe(0);
    expect(again.output).not.toContain("validating");
    expect(again.output).toContain("nothing to publish: every destination skipped\r\n");
  });

  it("keeps the ETA sane on a mixed tree: many small files first, then a big one", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const files: Record<string, string> = {};
    for (let i = 0; i < 1500; i++) files[`a/${String(i).padStart(4, "0")}.txt`] = `${i}\n`;
    files["z.bin"] = "z".repeat(48 * 1024 * 1024);
    await writeBundle(source, "reports.mixed", "2026-06-04T11:55:00Z", files);
    const configPath = await writeConfig(tmp(), source, dest);
    const started = Date.now();
    const { code, output } = await runInTerminal(["run", "--config", configPath]);
    const seconds = (Date.now() - started) / 1000;

    expect(code).toBe(0);
    const etas = output
      .split(ERASE)
      .filter((line) => /^(validating|publishing) /.test(line))
      .map((line) => /ETA (?:(\d+)m)?(\d+)s/.exec(line))
      .filter((match) => match !== null)
      .map((match) => Number(match[1] ?? 0) * 60 + Number(match[2]));
    // Small files go first in both phases; by bytes alone they promised minutes.
    expect(etas.length).toBeGreaterThan(0);
    // The bound is loose on purpose (a loaded machine slows the first second more than the
    // rest); the byte-weighted ETA it guards against said hours.
    expect(Math.max(...etas)).toBeLessThanOrEqual(Math.max(60, Math.ceil(seconds * 5)));
  });

  it("draws nothing with --quiet", async () => {
    const { configPath } = await largeBundle();
    const { code, output } = await runInTerminal(["run", "--quiet", "--config", configPath]);

    expect(code).toBe(0);
    expect(output).toContain("action=publish_new status=published outputs=400");
    expect(output).not.toContain("\u001b");
    expect(output).not.toMatch(/validating|publishing|published 400/);
  });

  it("draws nothing when stderr is not the terminal, though stdout is", async () => {
    const { configPath } = await largeBundle();
    const errors = join(tmp(), "stderr.txt");
    const { code, output } = await runInTerminal(
      ["run", "--config", configPath],
      `2>${quote(errors)}`,
    );

    expect(code).toBe(0);
    expect(output).toContain("action=publish_new status=published outputs=400");
    expect(output).not.toContain("\u001b");
    expect(await readFile(errors, "utf8")).toBe("");
  });

  it("passes a failing exit status through, with the error after a cleared line", async () => {
    const { configPath, dest } = await largeBundle();
    // Content no state records where an output would go: the destination refuses to publish.
    await writeFiles(dest, { "data/000.txt": "someone else's\n" });
    const { code, output } = await runInTerminal(["run", "--config", configPath]);

    expect(code).toBe(1);
    // The stdout line may come before or after the summary; the error comes after both.
    expect(output).toContain("nothing published; 1 failed\r\n");
    expect(output).toMatch(
      /\r\ndistributor: pipeline reports destination archive bundle \.: fail_unmanaged/,
    );
    expect(output.indexOf("distributor:")).toBeGreaterThan(output.indexOf("nothing published"));
  });
});

// In-process, with an stderr that claims to be a terminal: the events reach the display and the
// summary comes last; with a non-terminal stderr nothing at all is written there.
async function runWithStderr(isTTY: boolean, extra: string[] = []) {
  const source = join(tmp(), "src");
  const dest = join(tmp(), isTTY ? "tty" : "pipe");
  await writeSpecBundle(source);
  const configPath = await writeConfig(tmp(), source, dest);
  let stdout = "";
  let stderr = "";
  const code = await main(["run", "--config", configPath, ...extra], {
    stdout: { write: (chunk: string) => (stdout += chunk) },
    stderr: { write: (chunk: string) => (stderr += chunk) },
    stderrIsTTY: isTTY,
    stderrColumns: () => 40,
  });
  expect(await readFile(join(dest, "report.md"), "utf8")).toBe(REPORT);
  return { code, stdout, stderr };
}

describe("run progress in-process", () => {
  it("draws on an interactive stderr, never on stdout, cut to its width", async () => {
    const { code, stdout, stderr } = await runWithStderr(true);
    expect(code).toBe(0);
    expect(stderr).toContain(`${ERASE}validating reports: 0/1 files, 0 B/16 …${ERASE}`);
    expect(stderr.split(ERASE).at(-1)).toMatch(/^published 1 file, 16 B in \d+\.\d s/);
    expect(stderr.endsWith("\n")).toBe(true);
    expect(stdout).not.toContain("\u001b");
  });

  it("stays silent with --quiet", async () => {
    const { code, stderr } = await runWithStderr(true, ["--quiet"]);
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });

  it("stays silent when stderr is not a terminal", async () => {
    const { code, stderr } = await runWithStderr(false);
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });

  it("leaves a piped stderr empty in a real process", async () => {
    const source = join(tmp(), "src");
    await writeSpecBundle(source);
    const configPath = await writeConfig(tmp(), source, join(tmp(), "dest"));
    const result = await runCli(["run", "--config", configPath]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
  });
});

describe.skipIf(process.platform !== "linux")("audit progress on a pseudo-terminal", () => {
  it("counts the bytes checked in binary units", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeBundle(source, "reports.sized", "2026-06-04T11:55:00Z", {
      "data.bin": "x".repeat(164_850),
    });
    const configPath = await writeConfig(tmp(), source, dest);
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);

    const { code, output } = await runInTerminal(["audit", "--config", configPath]);

    expect(code).toBe(0);
    expect(output).toContain("\r\u001b[2Kaudit: 1 output(s), 161.0 KiB checked");
    expect(output).not.toContain("byte(s)");
  });
});
