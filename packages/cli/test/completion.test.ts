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
    // The count first: an empty COMPREPLY (bash then completes file names) differs from one
    // holding an empty word (it does not).
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash array expansions, not templates.
    'printf "%s\\n" "${#COMPREPLY[@]}" "${COMPREPLY[@]}"',
  ].join("\n");
  const { stdout } = await promisify(execFile)("bash", ["-c", program], {
    env: { ...process.env, PATH: `${directory}:${process.env.PATH ?? ""}` },
  });
  const [count, ...lines] = stdout.split("\n");
  return lines.slice(0, Number(count));
}

/** What `distributor --get-yargs-completions distributor ...words` prints, as the scripts ask. */
async function requested(words: string[]): Promise<string> {
  const result = await runCli(["--get-yargs-completions", "distributor", ...words]);
  expect(result.code, result.stderr).toBe(0);
  return result.stdout;
}

/** The command names of the `Commands:` section of `distributor --help`. */
async function listedCommands(): Promise<string[]> {
  const { stdout } = await runCli(["--help"]);
  const section = stdout.split("Commands:\n")[1]?.split("\n\n")[0] ?? "";
  return [...section.matchAll(/^ {2}distributor (\S+)/gm)].map((match) => match[1] as string);
}

/** The commands `distributor --help` lists, and the value-taking flags each one's help lists. */
async function valueFlagsByCommand(): Promise<Map<string, string[]>> {
  const names = (await listedCommands()).filter((name) => name !== "completion" && name !== "help");
  const flags = new Map<string, string[]>();
  for (const name of names) {
    const words = name === "manifest" ? ["manifest", "create"] : [name];
    const help = await runCli([...words, "--help"]);
    const taking = [...help.stdout.matchAll(/^ {2}--(\S+) .*\[(?:string|array)\]$/gm)].map(
      (match) => match[1] as string,
    );
    flags.set(words.join(" "), taking);
  }
  return flags;
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

    // The subcommand alone: its flags only after it.
    expect(await completeInBash(script, dir(), ["distributor", "manifest", ""])).toEqual([
      "create",
    ]);
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

  it("offers nothing after a flag that takes a path or a value, so bash completes file names", async () => {
    const { stdout: script } = await runCli(["completion"], { env: { SHELL: "/bin/bash" } });

    for (const words of [
      ["run", "--config", ""],
      ["run", "--plan-out", "pl"],
      ["validate", "--bundle", ""],
      ["validate", "--allowed-signers", ""],
      ["serve", "--listen", ""],
      ["manifest", "create", "--max-files", ""],
      ["--no-color", "run", "--lock-timeout", ""],
    ]) {
      expect(
        await completeInBash(script, dir(), ["distributor", ...words]),
        words.join(" "),
      ).toEqual([]);
    }
    // After the value, flags again.
    expect(
      await completeInBash(script, dir(), ["distributor", "run", "--config", "d.yml", "--q"]),
    ).toEqual(["--quiet"]);
  });

  it("answers every value-taking flag of every command with nothing, or with its values where it has some", async () => {
    const flags = await valueFlagsByCommand();
    expect(flags.get("run")).toEqual([
      "config",
      "pipeline",
      "allow-deletes",
      "plan-out",
      "lock-timeout",
      "format",
    ]);
    expect(flags.get("serve")).toEqual(["config", "listen"]);

    for (const [command, names] of flags) {
      const answers = await Promise.all(
        names.map((name) => requested([...command.split(" "), `--${name}`, ""])),
      );
      const offered = Object.fromEntries(names.map((name, index) => [name, answers[index]]));
      // Flags with known values offer them: --format everywhere, and audit's --release.
      const choices: Record<string, string> = { format: "text\njson\n" };
      if (command === "audit") choices.release = "all\ncurrent\n";
      const expected = Object.fromEntries(names.map((name) => [name, choices[name] ?? ""]));
      expect(offered, command).toEqual(expected);
    }
  }, 60_000);

  it("offers the commands after help, and a command's subcommands after its name", async () => {
    const { stdout: script } = await runCli(["completion"], { env: { SHELL: "/bin/bash" } });
    const commands = await listedCommands();
    expect(commands).toContain("manifest");

    expect((await completeInBash(script, dir(), ["distributor", "help", ""])).sort()).toEqual(
      commands.sort(),
    );
    expect(await completeInBash(script, dir(), ["distributor", "help", "re"])).toEqual([
      "reconcile-state",
    ]);
    expect(await completeInBash(script, dir(), ["distributor", "help", "manifest", ""])).toEqual([
      "create",
    ]);
    expect(await completeInBash(script, dir(), ["distributor", "help", "run", ""])).toEqual([]);
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
