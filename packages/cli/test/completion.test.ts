import { execFile } from "node:child_process";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { BIN, runCli, useTempDir } from "./helpers.js";

/**
 * Loads the printed bash script into a real bash, with `distributor` on the PATH running this
 * build, and asks it to complete `words` the way bash does when the operator presses Tab.
 */
async function completeInBash(script: string, directory: string, words: string[]) {
  const shim = join(directory, "distributor");
  await writeFile(shim, `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  await chmod(shim, 0o755);
  const scriptFile = join(directory, "completion.bash");
  await writeFile(scriptFile, script);
  const program = [
    `source ${JSON.stringify(scriptFile)}`,
    `COMP_WORDS=(${words.map((word) => `'${word}'`).join(" ")})`,
    `COMP_CWORD=${words.length - 1}`,
    "_distributor_yargs_completions",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash array expansion, not a template.
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join("\n");
  const { stdout } = await promisify(execFile)("bash", ["-c", program], {
    env: { ...process.env, PATH: `${directory}:${process.env.PATH ?? ""}` },
  });
  return stdout.trim().split("\n");
}

describe("completion", () => {
  const dir = useTempDir();

  it("prints a bash script that completes commands and flags", async () => {
    const result = await runCli(["completion"], { env: { SHELL: "/bin/bash" } });

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain(
      "complete -o bashdefault -o default -F _distributor_yargs_completions distributor",
    );
    expect(await completeInBash(result.stdout, dir(), ["distributor", "re"])).toEqual([
      "reconcile-state",
    ]);
    expect(await completeInBash(result.stdout, dir(), ["distributor", "prune", "--a"])).toEqual([
      "--apply",
    ]);
  });

  it("completes the manifest subcommand and the values of --format", async () => {
    const { stdout: script } = await runCli(["completion"], { env: { SHELL: "/bin/bash" } });

    expect(await completeInBash(script, dir(), ["distributor", "manifest", ""])).toContain(
      "create",
    );
    expect(await completeInBash(script, dir(), ["distributor", "manifest", "c"])).toEqual([
      "create",
    ]);
    expect(await completeInBash(script, dir(), ["distributor", "run", "--format", ""])).toEqual([
      "text",
      "json",
    ]);
    expect(
      await completeInBash(script, dir(), ["distributor", "manifest", "create", "--format", "j"]),
    ).toEqual(["json"]);
    // Flags still complete after a value.
    expect(
      await completeInBash(script, dir(), ["distributor", "run", "--format", "json", "--q"]),
    ).toEqual(["--quiet"]);
  });

  it("keeps its own messages for a wrong --format or subcommand", async () => {
    const [format, subcommand] = await Promise.all([
      runCli(["run", "--format", "xml"]),
      runCli(["manifest", "list", "dir"]),
    ]);

    expect(format.stderr).toBe('distributor: format must be text or json, not "xml"\n');
    expect(subcommand.stderr).toBe('distributor: unknown command "manifest list"\n');
  });

  it("prints a zsh script when SHELL names zsh", async () => {
    const result = await runCli(["completion"], { env: { SHELL: "/usr/bin/zsh" } });

    expect(result.code).toBe(0);
    expect(result.stdout).toContain("compdef _distributor_yargs_completions distributor");
  });

  it("explains itself under help and --help", async () => {
    const [help, flag] = await Promise.all([
      runCli(["help", "completion"]),
      runCli(["completion", "--help"]),
    ]);

    expect(help.code).toBe(0);
    expect(help.stdout).toContain("distributor completion >> ~/.bashrc");
    expect(flag.stdout).toBe(help.stdout);
  });

  it.each([
    [["completion", "bash"], "completion does not accept positional arguments"],
    [["completion", "--format", "json"], "unknown flag --format"],
  ])("refuses %j", async (args, message) => {
    const result = await runCli(args);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(`distributor: ${message}\n`);
  });
});
