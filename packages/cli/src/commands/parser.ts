import yargs, { type Argv } from "yargs";
import type { CommandContext, CommandOutcome, OutputFormat } from "../command.js";
import { UsageError } from "../errors.js";
import { booleanFlag, extraPositionals, type RawFlags } from "../flags.js";
import { COMMANDS } from "./index.js";
import type { CommandModule } from "./spec.js";
import { printVersion } from "./version/command.js";

/** A parsed command line: help text to print, or a command ready to run. */
export type Invocation =
  | { kind: "help"; text: string }
  | {
      kind: "command";
      /** Name used in the JSON envelope, e.g. `manifest create`. */
      command: string;
      format: OutputFormat;
      /** `--no-color` was given (NO_COLOR is read where the output is drawn). */
      noColor: boolean;
      execute(context: CommandContext): Promise<CommandOutcome>;
    };

/** What running the parser selected. */
export interface Selection {
  invocation?: Invocation;
  /** Command words after `help` (or none for bare `distributor`). */
  helpFor?: string[];
}

export interface ParserOptions {
  /** Declare `$0`, the command that prints help or the version; default true. */
  defaultCommand?: boolean;
}

export function buildParser(selection: Selection, options: ParserOptions = {}): Argv {
  let parser: Argv = yargs()
    .scriptName("distributor")
    .locale("en")
    .exitProcess(false)
    .version(false)
    .wrap(null)
    .parserConfiguration({
      "boolean-negation": false,
      "camel-case-expansion": false,
      "dot-notation": false,
      "greedy-arrays": false,
      "parse-numbers": false,
      "parse-positional-numbers": false,
    })
    .strictOptions()
    .help("help", "Show this help")
    .option("no-color", {
      type: "boolean",
      global: true,
      describe: "Print without colours (a non-empty NO_COLOR environment variable does the same)",
    })
    // yargs answers `--get-yargs-completions`, which the printed script calls, by itself.
    .completion(
      "completion",
      "Print a completion script for bash, or for zsh when SHELL names zsh (append it to ~/.bashrc or ~/.zshrc)",
    )
    .usage("Usage:\n  distributor <command> [flags]\n  distributor help [command]")
    .epilog(
      "Exit status: 0 success, 1 failure (any failed destination included), 2 usage error.\n" +
        "Run `distributor <command> --help` for the flags of one command.",
    )
    .fail((message, error) => {
      throw usageFailure(message, error);
    })
    .command(
      "help [command..]",
      "Show help for distributor or one command",
      (y) => y.positional("command", { type: "string", describe: "Command to describe" }),
      (argv) => {
        const words = argv.command;
        selection.helpFor = Array.isArray(words) ? words.map(String) : [];
      },
    );
  for (const spec of COMMANDS) parser = declare(parser, spec, selection);
  if (options.defaultCommand === false) return parser;
  return parser.command(
    "$0",
    false,
    (y) =>
      y.option("version", {
        type: "boolean",
        describe: "Print the distributor version (the same as distributor version)",
      }),
    (argv) => {
      const flags = argv as RawFlags;
      const [word] = extraPositionals(flags, 0);
      if (word !== undefined) throw new UsageError(`unknown command ${JSON.stringify(word)}`);
      if (booleanFlag(flags, "version")) {
        const noColor = booleanFlag(flags, "no-color");
        selection.invocation = {
          kind: "command",
          command: "version",
          format: "text",
          noColor,
          execute: printVersion,
        };
        return;
      }
      selection.helpFor = [];
    },
  );
}

/** Declares one command: its help, positionals and flags, and what running it selects. */
function declare(parser: Argv, spec: CommandModule, selection: Selection): Argv {
  return parser.command(
    spec.command,
    spec.describe,
    (y) => {
      let builder: Argv = y.usage(spec.usage);
      for (const [name, positional] of Object.entries(spec.positionals ?? {})) {
        const { type, describe } = positional;
        builder = builder.positional(name, { type, describe });
      }
      for (const [name, flag] of Object.entries(spec.flags)) {
        const { type, describe } = flag;
        const array = flag.array ? { array: true } : {};
        builder = builder.option(name, { type, describe, ...array });
      }
      return spec.epilog === undefined ? builder : builder.epilog(spec.epilog);
    },
    (argv) => {
      const flags = argv as RawFlags;
      const { format, execute } = spec.prepare(flags);
      const noColor = booleanFlag(flags, "no-color");
      selection.invocation = { kind: "command", command: spec.name, format, noColor, execute };
    },
  );
}

/** Turns yargs' own validation failures into usage errors with distributor's wording. */
function usageFailure(message: string | undefined, error: Error | undefined): Error {
  if (error !== undefined && error.name !== "YError") return error;
  const text = message ?? error?.message ?? "invalid command line";
  const unknown = /^Unknown arguments?: (.*)$/.exec(text);
  if (unknown?.[1] !== undefined) {
    const flags = unknown[1]
      .split(", ")
      .map((name) => (name.length === 1 ? `-${name}` : `--${name}`));
    return new UsageError(`unknown flag${flags.length > 1 ? "s" : ""} ${flags.join(", ")}`);
  }
  return new UsageError(text);
}
