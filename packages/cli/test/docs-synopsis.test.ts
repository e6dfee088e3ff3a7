import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "./helpers.js";

// The synopsis at the top of docs/cli.md is what operators read first: every command and flag it
// shows must exist, and every flag a command's --help lists must be shown there.

const CLI_MD = fileURLToPath(new URL("../../../docs/cli.md", import.meta.url));

/** Flags every command accepts, which the synopsis does not repeat on each line. */
const GLOBAL_FLAGS: ReadonlySet<string> = new Set(["--help", "--no-color", "--version"]);

/** The lines of the first fenced block of docs/cli.md, each without the leading `distributor `. */
async function synopsisLines(): Promise<string[]> {
  const text = await readFile(CLI_MD, "utf8");
  const block = /^```text\n([\s\S]*?)^```$/m.exec(text)?.[1];
  if (block === undefined) throw new Error("docs/cli.md has no synopsis block");
  return block
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      if (!line.startsWith("distributor ")) throw new Error(`not a command line: ${line}`);
      return line.slice("distributor ".length);
    });
}

/** Splits on `|` outside brackets and parentheses: `[--help] | help [command]` is two forms. */
function forms(line: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const character of line) {
    if (character === "[" || character === "(") depth += 1;
    if (character === "]" || character === ")") depth -= 1;
    if (character === "|" && depth === 0) {
      parts.push(current.trim());
      current = "";
    } else {
      current += character;
    }
  }
  parts.push(current.trim());
  return parts;
}

/** The command words of one form (`manifest create`), empty for distributor itself. */
function commandOf(form: string): string {
  const words: string[] = [];
  for (const word of form.split(" ")) {
    if (!/^[a-z][a-z-]*$/.test(word)) break;
    words.push(word);
  }
  return words.join(" ");
}

const flagsIn = (text: string) => new Set(text.match(/--[a-z][a-z-]*/g) ?? []);

/** Every command of the synopsis with the flags its forms show. */
async function synopsis(): Promise<Map<string, Set<string>>> {
  const commands = new Map<string, Set<string>>();
  for (const line of await synopsisLines()) {
    for (const form of forms(line)) {
      const name = commandOf(form);
      const flags = commands.get(name) ?? new Set<string>();
      for (const flag of flagsIn(form)) flags.add(flag);
      commands.set(name, flags);
    }
  }
  return commands;
}

/** The flags of the `Options:` section of a help text. */
function helpFlags(help: string): Set<string> {
  const start = help.indexOf("\nOptions:\n");
  if (start < 0) return new Set();
  const flags = new Set<string>();
  for (const line of help.slice(start).split("\n").slice(2)) {
    const flag = /^ {2}(--[a-z][a-z-]*)\s/.exec(line)?.[1];
    if (flag === undefined) break;
    flags.add(flag);
  }
  return flags;
}

async function helpOf(command: string): Promise<string> {
  const result = await runCli([...(command === "" ? [] : command.split(" ")), "--help"]);
  expect(result.code, `${command} --help: ${result.stderr}`).toBe(0);
  return result.stdout;
}

describe("docs/cli.md synopsis", () => {
  it("shows every command distributor --help lists", async () => {
    const documented = new Set([...(await synopsis()).keys()].map((name) => name.split(" ")[0]));
    const help = await helpOf("");
    const listed = [...help.matchAll(/^ {2}distributor ([a-z][a-z-]*)/gm)].map((m) => m[1]);

    expect(listed.length).toBeGreaterThan(10);
    for (const name of listed) expect(documented, `synopsis lacks ${name}`).toContain(name);
  });

  it("shows exactly the flags of each command's --help", async () => {
    const commands = await synopsis();
    expect([...commands.keys()]).toEqual(
      expect.arrayContaining(["", "help", "run", "audit", "manifest create", "reconcile-state"]),
    );
    await Promise.all(
      [...commands].map(async ([name, shown]) => {
        const accepted = helpFlags(await helpOf(name));
        for (const flag of shown) {
          expect(accepted, `synopsis: distributor ${name} ${flag} is not in its --help`).toContain(
            flag,
          );
        }
        for (const flag of accepted) {
          if (GLOBAL_FLAGS.has(flag)) continue;
          expect(shown, `synopsis of distributor ${name} lacks ${flag}`).toContain(flag);
        }
      }),
    );
  });

  it("shows every flag of a command's --help in the synopsis of the command's own section", async () => {
    const sections = await sectionSynopses();
    expect([...sections.keys()]).toEqual(
      expect.arrayContaining(["run", "manifest create", "upload", "serve"]),
    );
    await Promise.all(
      [...sections].map(async ([name, shown]) => {
        for (const flag of helpFlags(await helpOf(name))) {
          if (GLOBAL_FLAGS.has(flag)) continue;
          expect(shown, `docs/cli.md section ${name} lacks ${flag}`).toContain(flag);
        }
      }),
    );
  });
});

/**
 * The flags the first `sh` block of each command's section (`## \`manifest create\``) shows on
 * its lines that run that command.
 */
async function sectionSynopses(): Promise<Map<string, Set<string>>> {
  const text = await readFile(CLI_MD, "utf8");
  const sections = new Map<string, Set<string>>();
  for (const [, name = "", body = ""] of text.matchAll(
    /^## `([a-z][a-z -]*)`\n([\s\S]*?)(?=^## |$(?![\s\S]))/gm,
  )) {
    const block = /^```sh\n([\s\S]*?)^```$/m.exec(body)?.[1] ?? "";
    const lines = block.split("\n").filter((line) => line.includes(`distributor ${name}`));
    sections.set(name, flagsIn(lines.join("\n")));
  }
  return sections;
}
