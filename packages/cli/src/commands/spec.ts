import type { CommandContext, CommandHandler, CommandOutcome, OutputFormat } from "../command.js";
import type { RawFlags } from "../flags.js";

/** A flag as a command declares it; yargs gets it as an option of the same name. */
export interface FlagSpec {
  type: "string" | "boolean";
  describe: string;
  /** Repeatable: the values arrive as an array, in command-line order. */
  array?: true;
  /**
   * The values completion offers (completion.ts). Not declared to yargs, which would check them
   * in its own words before the command could in distributor's.
   */
  choices?: readonly string[];
}

/** A positional argument as a command declares it (see `FlagSpec.choices`). */
export interface PositionalSpec {
  type: "string";
  describe: string;
  choices?: readonly string[];
}

/** What a command's parser makes of its flags: the output format and the handler's options. */
export interface ParsedFlags<Options> {
  format: OutputFormat;
  options: Options;
}

/** One command: its command line, its help, how its flags are checked and where its handler is. */
export interface CommandSpec<Options> {
  /** The yargs command, positionals included: `apply [plan]`. */
  command: string;
  /** The name in the JSON envelope: `manifest create`. */
  name: string;
  /** The line in the command list of `distributor --help`. */
  describe: string;
  usage: string;
  epilog?: string;
  /** Words the first positional may be (`manifest create`); `help` accepts them after the name. */
  subcommands?: readonly string[];
  /** In the order `--help` lists them. */
  positionals?: Readonly<Record<string, PositionalSpec>>;
  /** In the order `--help` lists them. */
  flags: Readonly<Record<string, FlagSpec>>;
  /** Checks the flags, in the order their errors take precedence; throws `UsageError`. */
  parse(flags: RawFlags): ParsedFlags<Options>;
  /** Imports the handler, on first use only: `--help` loads no workflow code. */
  load(): Promise<CommandHandler<Options>>;
}

/** A command with its options type erased, as the parser takes it. */
export interface CommandModule extends Omit<CommandSpec<unknown>, "parse" | "load"> {
  /** Checks the flags and returns the command ready to run; throws `UsageError`. */
  prepare(flags: RawFlags): {
    format: OutputFormat;
    execute(context: CommandContext): Promise<CommandOutcome>;
  };
}

export function defineCommand<Options>(spec: CommandSpec<Options>): CommandModule {
  const { parse, load, ...declaration } = spec;
  return {
    ...declaration,
    prepare(flags) {
      const { format, options } = parse(flags);
      return { format, execute: async (context) => (await load())(options, context) };
    },
  };
}
