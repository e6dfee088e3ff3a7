import { completionsFor } from "./commands/completion/command.js";
import { COMMAND_NAMES, COMMANDS, commandSwitches, commandWord } from "./commands/index.js";
import { buildParser, type Invocation, type Selection } from "./commands/parser.js";
import { UsageError } from "./errors.js";
import { checkBooleanAssignments, joinDashValues } from "./flags.js";

export type { Invocation };

/** The commands' switches, and the parser's own: `--help`, `--no-color` and `--version`. */
const BOOLEAN_FLAGS: ReadonlySet<string> = new Set([
  "help",
  "no-color",
  "version",
  ...commandSwitches(),
]);

/** The flag the printed completion script calls distributor with, followed by the words typed. */
const COMPLETION_REQUEST = "--get-yargs-completions";

/**
 * Parses the arguments after `distributor`. Throws `UsageError` for anything the command line
 * gets wrong; never runs a workflow (the returned invocation does, when executed).
 */
export async function parseCommandLine(words: readonly string[]): Promise<Invocation> {
  const request = words.indexOf(COMPLETION_REQUEST);
  if (request !== -1) {
    const offered = completionsFor(words.slice(request + 1));
    if (offered !== undefined) {
      return { kind: "help", text: offered.map((word) => `${word}\n`).join("") };
    }
  }
  const argv = joinDashValues(words, BOOLEAN_FLAGS);
  // Help wins over every other flag on the line, malformed ones included.
  if (!argv.includes("--help")) checkBooleanAssignments(argv, BOOLEAN_FLAGS);
  if (argv.find((token) => !token.startsWith("-")) === "completion") return completion(argv);
  const selection: Selection = {};
  const output = await runParser(argv, selection);
  if (selection.helpFor !== undefined) {
    return { kind: "help", text: await helpText(selection.helpFor) };
  }
  if (selection.invocation !== undefined) return selection.invocation;
  // yargs answered `--help` itself.
  return { kind: "help", text: output };
}

const COMPLETION_HELP =
  "Usage:\n  distributor completion\n\n" +
  "Prints a shell script that completes distributor's commands and flags: for bash, or for zsh\n" +
  "when SHELL names zsh. Install it with\n" +
  "  distributor completion >> ~/.bashrc    (bash)\n" +
  "  distributor completion >> ~/.zshrc     (zsh)\n";

/**
 * `distributor completion` prints yargs' completion script. yargs prints it while parsing and
 * then, since it may not exit the process, would go on to the default command, whose run discards
 * the printed text; so the script is asked of a parser without one. yargs would print the script
 * for `--help` too, so the help text is distributor's own.
 */
async function completion(argv: readonly string[]): Promise<Invocation> {
  if (argv.includes("--help")) return { kind: "help", text: COMPLETION_HELP };
  let script = "";
  let positionals: unknown[] = [];
  await buildParser({}, { defaultCommand: false }).parseAsync([...argv], {}, (_e, parsed, text) => {
    script = text;
    positionals = parsed._;
  });
  if (positionals.length > 1) {
    throw new UsageError("completion does not accept positional arguments");
  }
  return { kind: "help", text: script };
}

async function helpText(words: readonly string[]): Promise<string> {
  const [name, sub] = words;
  if (name === "completion" && words.length === 1) return COMPLETION_HELP;
  if (name !== undefined) {
    const subcommands = COMMANDS.find((spec) => commandWord(spec) === name)?.subcommands ?? [];
    const known =
      COMMAND_NAMES.includes(name) &&
      (words.length === 1 || (subcommands.includes(sub ?? "") && words.length === 2));
    if (!known) throw new UsageError(`unknown command ${JSON.stringify(words.join(" "))}`);
  }
  return runParser([...words, "--help"], {});
}

async function runParser(argv: readonly string[], selection: Selection): Promise<string> {
  let output = "";
  await buildParser(selection).parseAsync([...argv], {}, (_error, _argv, text) => {
    output = text;
  });
  return output;
}
