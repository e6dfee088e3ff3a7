import yargs, { type Argv } from "yargs";
import type {
  ApplyCommandOptions,
  AuditCommandOptions,
  CommandContext,
  CommandHandler,
  CommandOutcome,
  InspectCommandOptions,
  ManifestCreateCommandOptions,
  OutputFormat,
  PruneCommandOptions,
  ReconcileStateCommandOptions,
  RunCommandOptions,
  ServeCommandOptions,
  UploadCommandOptions,
  ValidateCommandOptions,
} from "./command.js";
import { UsageError } from "./errors.js";
import {
  booleanFlag,
  checkBooleanAssignments,
  extraPositionals,
  joinDashValues,
  OUTPUT_FORMATS,
  optionalString,
  outputFormat,
  type RawFlags,
  rejectPositionals,
  requiredString,
  stringList,
} from "./flags.js";

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

/** `--allow-deletes <n>` when given: a whole number of outputs. */
function allowDeletesFlag(flags: RawFlags): { allowDeletes?: number } {
  const value = optionalString(flags, "allow-deletes");
  if (value === undefined) return {};
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(
      `--allow-deletes must be a whole number of outputs (such as 250), got ${JSON.stringify(value)}`,
    );
  }
  return { allowDeletes: Number(value) };
}

/** `--lock-timeout` when given; parsed by the handler, which has the duration parser loaded. */
function lockTimeoutFlag(flags: RawFlags): { lockTimeout?: string } {
  const value = optionalString(flags, "lock-timeout");
  return value === undefined ? {} : { lockTimeout: value };
}

/** `--config` of `run` when the flag is omitted. */
export const DEFAULT_CONFIG_PATH = "./distributor.yml";

const BOOLEAN_FLAGS: ReadonlySet<string> = new Set([
  "help",
  "dry-run",
  "force",
  "repair",
  "adopt",
  "rebuild",
  "apply",
  "all-owners",
  "no-color",
  "quiet",
  "version",
  "wait",
]);

const COMMAND_NAMES: ReadonlySet<string> = new Set([
  "help",
  "version",
  "run",
  "apply",
  "validate",
  "inspect",
  "manifest",
  "reconcile-state",
  "prune",
  "audit",
  "serve",
  "upload",
  "completion",
]);

/** The subcommands of `manifest`. */
const MANIFEST_SUBCOMMANDS: readonly string[] = ["create"];

/** The flag the printed completion script calls distributor with, followed by the words typed. */
const COMPLETION_REQUEST = "--get-yargs-completions";

/**
 * Parses the arguments after `distributor`. Throws `UsageError` for anything the command line
 * gets wrong; never runs a workflow (the returned invocation does, when executed).
 */
export async function parseCommandLine(words: readonly string[]): Promise<Invocation> {
  const argv = joinDashValues(words, BOOLEAN_FLAGS);
  // Help wins over every other flag on the line, malformed ones included.
  if (!argv.includes("--help")) checkBooleanAssignments(argv, BOOLEAN_FLAGS);
  if (argv.find((token) => !token.startsWith("-")) === "completion") return completion(argv);
  const selection: Selection = {};
  const output = await runParser(argv, selection, {
    completing: argv.includes(COMPLETION_REQUEST),
  });
  if (selection.helpFor !== undefined) {
    return { kind: "help", text: await helpText(selection.helpFor) };
  }
  if (selection.invocation !== undefined) return selection.invocation;
  // yargs answered `--help` itself.
  return { kind: "help", text: output };
}

interface Selection {
  invocation?: Invocation;
  /** Command words after `help` (or none for bare `distributor`). */
  helpFor?: string[];
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
    const known =
      COMMAND_NAMES.has(name) &&
      (words.length === 1 ||
        (name === "manifest" && MANIFEST_SUBCOMMANDS.includes(sub ?? "") && words.length === 2));
    if (!known) throw new UsageError(`unknown command ${JSON.stringify(words.join(" "))}`);
  }
  return runParser([...words, "--help"], {});
}

async function runParser(
  argv: readonly string[],
  selection: Selection,
  options: ParserOptions = {},
): Promise<string> {
  let output = "";
  await buildParser(selection, options).parseAsync([...argv], {}, (_error, _argv, text) => {
    output = text;
  });
  return output;
}

function command(
  selection: Selection,
  name: string,
  format: OutputFormat,
  execute: (context: CommandContext) => Promise<CommandOutcome>,
  flags: RawFlags,
): void {
  const noColor = booleanFlag(flags, "no-color");
  selection.invocation = { kind: "command", command: name, format, noColor, execute };
}

/** Runs a handler module loaded on first use, so `--help` loads nothing but yargs. */
function lazily<Options>(
  load: () => Promise<CommandHandler<Options>>,
  options: Options,
): (context: CommandContext) => Promise<CommandOutcome> {
  return async (context) => (await load())(options, context);
}

interface ParserOptions {
  /** Declare `$0`, the command that prints help or the version; default true. */
  defaultCommand?: boolean;
  /**
   * The parser answers a completion request: `--format` values and `manifest` subcommands are
   * declared as yargs `choices`, which completion offers. Only then: yargs also checks `choices`,
   * with messages of its own, before the handlers could say what is wrong in distributor's words.
   */
  completing?: boolean;
}

function buildParser(selection: Selection, options: ParserOptions = {}): Argv {
  const completing = options.completing ?? false;
  const formatOption = {
    type: "string",
    describe: "Output format: text (default) or json",
    ...(completing ? { choices: OUTPUT_FORMATS } : {}),
  } as const;
  const parser = yargs()
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
    )
    .command(
      "version",
      "Print the distributor version",
      (y) =>
        y
          .usage("Usage:\n  distributor version [--format text|json]")
          .option("format", formatOption),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "version", 1);
        const format = outputFormat(flags);
        command(selection, "version", format, lazily(loadVersion, {}), flags);
      },
    )
    .command(
      "run",
      "Publish the bundles of configured pipelines to their destinations",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor run [--config <path>] [--pipeline <id>]... [--dry-run] [--force] [--repair] [--allow-deletes <n>] [--lock-timeout <duration>] [--quiet] [--format text|json]\n" +
              "  distributor run [--config <path>] [--pipeline <id>]... [--repair] [--allow-deletes <n>] --plan-out <file> [--format text|json]",
          )
          .option("config", {
            type: "string",
            describe: `Configuration file (default ${DEFAULT_CONFIG_PATH})`,
          })
          .option("pipeline", {
            type: "string",
            array: true,
            describe:
              "Run only this pipeline; repeat the flag for several (default: every pipeline)",
          })
          .option("dry-run", {
            type: "boolean",
            describe: "Read sources and destinations and print the plan; write nothing anywhere",
          })
          .option("force", {
            type: "boolean",
            describe:
              "Replace destination content that would otherwise fail as a conflict, as unmanaged, or as newer",
          })
          .option("repair", {
            type: "boolean",
            describe:
              "Where the state already records the current source, restore managed outputs that are missing or changed (action repair)",
          })
          .option("allow-deletes", {
            type: "string",
            describe:
              "Let a publication delete up to this many managed outputs whatever the destination's max_deletes allows",
          })
          .option("plan-out", {
            type: "string",
            describe:
              "Plan as --dry-run does, print the plan for review and save it to this file (atomically) for `distributor apply`; nothing is written anywhere else",
          })
          .option("lock-timeout", {
            type: "string",
            describe:
              "Wait this long (Go duration: 500ms, 30s, 2m) for another run's lease on a state file before failing (default 0s)",
          })
          .option("quiet", {
            type: "boolean",
            describe:
              "Draw no progress and no summary line on stderr (drawn only when stderr is a terminal)",
          })
          .option("format", formatOption)
          .epilog(
            "Pipelines run in configuration order. Each destination is planned and written on its own;\n" +
              "one failing destination does not stop the others, but makes the exit status 1.\n" +
              "With --plan-out the plan file is written only when every destination could be planned.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "run", 1);
        const format = outputFormat(flags);
        const options: RunCommandOptions = {
          configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
          pipelineIds: stringList(flags, "pipeline"),
          dryRun: booleanFlag(flags, "dry-run"),
          force: booleanFlag(flags, "force"),
          repair: booleanFlag(flags, "repair"),
          ...allowDeletesFlag(flags),
          ...planOutFlag(flags),
          ...lockTimeoutFlag(flags),
          quiet: booleanFlag(flags, "quiet"),
        };
        command(
          selection,
          "run",
          format,
          lazily(async () => (await import("./handlers/run.js")).runCommand, options),
          flags,
        );
      },
    )
    .command(
      "apply [plan]",
      "Carry out a plan saved by `run --plan-out`, or refuse where a destination moved on",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor apply [--config <path>] [--dry-run] [--max-age <duration>] [--lock-timeout <duration>] [--quiet] [--format text|json] <plan-file>",
          )
          .positional("plan", { type: "string", describe: "Plan file written by run --plan-out" })
          .option("config", {
            type: "string",
            describe: "Configuration file (default: the one the plan was made from)",
          })
          .option("dry-run", {
            type: "boolean",
            describe:
              "Print the plan for review and check it against sources and destinations; write nothing anywhere",
          })
          .option("max-age", {
            type: "string",
            describe:
              "Refuse a plan made longer ago than this (Go duration: 30m, 2h; default 24h): its states record the plan's time as published_at",
          })
          .option("lock-timeout", {
            type: "string",
            describe:
              "Wait this long (Go duration: 500ms, 30s, 2m) for another run's lease on a state file before failing (default 0s)",
          })
          .option("quiet", {
            type: "boolean",
            describe:
              "Draw no progress and no summary line on stderr (drawn only when stderr is a terminal)",
          })
          .option("format", formatOption)
          .epilog(
            "Per destination, apply takes the lease and plans again at the plan's time: only when that\n" +
              "gives exactly the saved plan (same state version, stored files, source digests and\n" +
              "configuration) does it write the saved outputs, state and deletes. Otherwise that\n" +
              "destination fails with error code plan_stale, source_changed or config_changed and none\n" +
              "of the plan is carried out there (a lease a dead run left is still recovered first, as\n" +
              "any run does); the others still apply. A plan older than --max-age fails as a whole\n" +
              "(plan_expired). Any failure makes the exit status 1.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        const format = outputFormat(flags);
        const options = applyOptions(flags);
        command(
          selection,
          "apply",
          format,
          lazily(async () => (await import("./handlers/apply.js")).applyCommand, options),
          flags,
        );
      },
    )
    .command(
      "validate [path]",
      "Check a bundle, a tree of bundles, or the bundles of a configured source",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor validate [--allowed-signers <file> [--signature-namespace <ns>]] [--format text|json] <path>\n" +
              "  distributor validate --config <path> --pipeline <id> [--bundle <path>] [--format text|json]",
          )
          .positional("path", {
            type: "string",
            describe: "Local bundle directory, or a directory holding several bundles",
          })
          .option("config", { type: "string", describe: "Configuration file naming the source" })
          .option("pipeline", { type: "string", describe: "Pipeline whose source is checked" })
          .option("bundle", {
            type: "string",
            describe:
              "Only the bundle at this path relative to the source root (default: every bundle)",
          })
          .option("allowed-signers", {
            type: "string",
            describe:
              "With a path: require manifest.json.sig by a key this OpenSSH allowed_signers file trusts",
          })
          .option("signature-namespace", {
            type: "string",
            describe: "SSHSIG namespace --allowed-signers checks (default: distributor)",
          })
          .option("format", formatOption)
          .epilog(
            "A bundle passes when its manifest parses and every listed file exists with the listed\n" +
              "size and sha256. With --config the pipeline's validation policy applies, its\n" +
              "source.signatures included; with a path, --allowed-signers checks signatures too.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        const options = validateOptions(flags);
        const format = outputFormat(flags);
        command(
          selection,
          "validate",
          format,
          lazily(async () => (await import("./handlers/validate.js")).validateCommand, options),
          flags,
        );
      },
    )
    .command(
      "inspect [path]",
      "Show a bundle's manifest and files, or a destination's state",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor inspect [--format text|json] <path>\n" +
              "  distributor inspect --config <path> --pipeline <id> [--bundle <path> | --destination <id>] [--format text|json]",
          )
          .positional("path", {
            type: "string",
            describe:
              "Local bundle directory, directory of bundles, or destination directory holding .distributor.json",
          })
          .option("config", { type: "string", describe: "Configuration file naming the pipeline" })
          .option("pipeline", { type: "string", describe: "Pipeline to inspect" })
          .option("bundle", {
            type: "string",
            describe: "Only the source bundle at this path relative to the source root",
          })
          .option("destination", {
            type: "string",
            describe: "Show the state of this destination instead of the source",
          })
          .option("format", formatOption)
          .epilog(
            "Inspect reads only; it reports what it finds, including files whose size or sha256 differ\n" +
              "from the manifest.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        const options = inspectOptions(flags);
        const format = outputFormat(flags);
        command(
          selection,
          "inspect",
          format,
          lazily(async () => (await import("./handlers/inspect.js")).inspectCommand, options),
          flags,
        );
      },
    )
    .command(
      // One subcommand only; a nested yargs command would misreport extra positionals.
      "manifest [subcommand] [path]",
      "Write manifest.json for a bundle directory (manifest create)",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor manifest create --id <bundle-id> [--created <rfc3339>] [--force] [--max-files <n>] [--sign <key-file>] [--signature-namespace <ns>] [--format text|json] <bundle-path>",
          )
          .positional("subcommand", {
            type: "string",
            describe: "create (the only subcommand)",
            ...(completing ? { choices: MANIFEST_SUBCOMMANDS } : {}),
          })
          .positional("path", { type: "string", describe: "Bundle directory to list" })
          .option("id", { type: "string", describe: "Bundle id recorded in the manifest" })
          .option("created", {
            type: "string",
            describe: "Creation time, RFC 3339 with an offset (default: now, whole seconds, UTC)",
          })
          .option("force", { type: "boolean", describe: "Overwrite an existing manifest.json" })
          .option("max-files", {
            type: "string",
            describe:
              "Most files to list; a bigger bundle is refused, nothing written (default 100000)",
          })
          .option("sign", signOption)
          .option("signature-namespace", signatureNamespaceOption)
          .option("format", formatOption)
          .epilog(
            "Lists every regular file below the bundle directory with its sha256 and size. Symbolic\n" +
              "links are refused, and an existing manifest.json is kept unless --force is given.\n" +
              "--sign runs ssh-keygen -Y sign over the manifest written and checks the signature it\n" +
              "made before writing manifest.json.sig; a pipeline with source.signatures verifies it.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        const options = manifestCreateOptions(flags);
        const format = outputFormat(flags);
        command(
          selection,
          "manifest create",
          format,
          lazily(
            async () => (await import("./handlers/manifest-create.js")).manifestCreateCommand,
            options,
          ),
          flags,
        );
      },
    )
    .command(
      "reconcile-state",
      "Drop state records of managed outputs that no longer exist at a destination",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor reconcile-state --config <path> --pipeline <id> --destination <id> [--all-owners | --adopt | --rebuild] [--dry-run] [--lock-timeout <duration>] [--format text|json]",
          )
          .option("config", { type: "string", describe: "Configuration file (required)" })
          .option("pipeline", {
            type: "string",
            describe: "Pipeline that selects the destination root (required)",
          })
          .option("destination", {
            type: "string",
            describe: "Destination whose root is repaired (required)",
          })
          .option("all-owners", {
            type: "boolean",
            describe:
              "In a shared root, repair the records of every owner, not only this destination's",
          })
          .option("adopt", {
            type: "boolean",
            describe:
              "Record unmanaged files whose path and bytes equal an output the current source publishes there (writes only the state)",
          })
          .option("rebuild", {
            type: "boolean",
            describe:
              "Replace an unreadable or invalid state with one rebuilt from the current source and the bytes present (never deletes)",
          })
          .option("dry-run", {
            type: "boolean",
            describe: "Report the repair without rewriting .distributor.json",
          })
          .option("lock-timeout", {
            type: "string",
            describe:
              "Wait this long (Go duration: 500ms, 30s, 2m) for another run's lease on a state file before failing (default 0s)",
          })
          .option("format", formatOption)
          .epilog(
            "Unmanaged entries are reported, never deleted or adopted; output digests are not checked.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "reconcile-state", 1);
        const format = outputFormat(flags);
        const options: ReconcileStateCommandOptions = {
          configPath: requiredString(flags, "config", "reconcile-state"),
          pipelineId: requiredString(flags, "pipeline", "reconcile-state"),
          destinationId: requiredString(flags, "destination", "reconcile-state"),
          allOwners: booleanFlag(flags, "all-owners"),
          ...adoptionMode(flags),
          dryRun: booleanFlag(flags, "dry-run"),
          ...lockTimeoutFlag(flags),
        };
        command(
          selection,
          "reconcile-state",
          format,
          lazily(
            async () => (await import("./handlers/reconcile-state.js")).reconcileStateCommand,
            options,
          ),
          flags,
        );
      },
    )
    .command(
      "prune",
      "Delete managed outputs selected by the destination's retention policy",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor prune --config <path> --pipeline <id> --destination <id> (--dry-run|--apply) [--lock-timeout <duration>] [--format text|json]",
          )
          .option("config", { type: "string", describe: "Configuration file (required)" })
          .option("pipeline", {
            type: "string",
            describe: "Pipeline that selects the destination root and owner (required)",
          })
          .option("destination", {
            type: "string",
            describe: "Destination whose retention.prune policy applies (required)",
          })
          .option("dry-run", {
            type: "boolean",
            describe: "Report the outputs that would be deleted; change nothing",
          })
          .option("apply", {
            type: "boolean",
            describe: "Delete the planned outputs, then rewrite .distributor.json",
          })
          .option("lock-timeout", {
            type: "string",
            describe:
              "Wait this long (Go duration: 500ms, 30s, 2m) for another run's lease on a state file before failing (default 0s)",
          })
          .option("format", formatOption)
          .epilog(
            "Exactly one of --dry-run or --apply is required. Only managed outputs are deleted;\n" +
              "unmanaged files and .distributor.json stay.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "prune", 1);
        const format = outputFormat(flags);
        const configPath = requiredString(flags, "config", "prune");
        const pipelineId = requiredString(flags, "pipeline", "prune");
        const destinationId = requiredString(flags, "destination", "prune");
        const dryRun = booleanFlag(flags, "dry-run");
        if (dryRun === booleanFlag(flags, "apply")) {
          throw new UsageError("prune requires exactly one of --dry-run or --apply");
        }
        const options: PruneCommandOptions = {
          configPath,
          pipelineId,
          destinationId,
          dryRun,
          ...lockTimeoutFlag(flags),
        };
        command(
          selection,
          "prune",
          format,
          lazily(async () => (await import("./handlers/prune.js")).pruneCommand, options),
          flags,
        );
      },
    )
    .command(
      "audit",
      "Compare the size and SHA-256 of every managed output with its destination state",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor audit [--config <path>] [--pipeline <id>]... [--destination <id>] [--quiet] [--format text|json]",
          )
          .option("config", {
            type: "string",
            describe: `Configuration file (default ${DEFAULT_CONFIG_PATH})`,
          })
          .option("pipeline", {
            type: "string",
            array: true,
            describe:
              "Audit only this pipeline; repeat the flag for several (default: every pipeline)",
          })
          .option("destination", {
            type: "string",
            describe: "Audit only the destination with this id (of each selected pipeline)",
          })
          .option("quiet", {
            type: "boolean",
            describe: "Draw no progress on stderr (drawn only when stderr is a terminal)",
          })
          .option("format", formatOption)
          .epilog(
            "Reads only: takes no lease and writes nothing. Exit status 1 when a managed output is\n" +
              "missing or changed, or a state file is invalid; unmanaged entries are reported only.\n" +
              "Restore what drifted with `distributor run --repair`.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "audit", 1);
        const format = outputFormat(flags);
        const destinationId = optionalString(flags, "destination");
        const options: AuditCommandOptions = {
          configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
          pipelineIds: stringList(flags, "pipeline"),
          ...(destinationId === undefined ? {} : { destinationId }),
          quiet: booleanFlag(flags, "quiet"),
        };
        command(
          selection,
          "audit",
          format,
          lazily(async () => (await import("./handlers/audit.js")).auditCommand, options),
          flags,
        );
      },
    )
    .command(
      "serve",
      "Run the HTTP upload API: accept bundles for http_upload pipelines and publish them",
      (y) =>
        y
          .usage("Usage:\n  distributor serve [--config <path>] [--listen <host:port>]")
          .option("config", {
            type: "string",
            describe: `Configuration file (default ${DEFAULT_CONFIG_PATH})`,
          })
          .option("listen", {
            type: "string",
            describe:
              "Address to listen on, host:port or [ipv6]:port (default server.http.listen, 127.0.0.1:8080); port 0 picks a free port",
          })
          .epilog(
            "Producers POST gzip or plain tar archives to /pipelines/<id>/uploads with a bearer token\n" +
              "from upload_tokens; each accepted bundle is validated, queued and published by the\n" +
              "pipeline's destinations. GET /runs/<run_id> reports a run, GET /healthz the server.\n" +
              "Every upload token must resolve (environment or secrets.directory) or serve does not start.\n" +
              "Logs are JSON lines on stderr, one per request and per run; tokens are never logged.\n" +
              "SIGINT or SIGTERM stops accepting, lets accepted runs finish and exits 0; a second\n" +
              "signal exits at once.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        rejectPositionals(flags, "serve", 1);
        const listen = optionalString(flags, "listen");
        const options: ServeCommandOptions = {
          configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
          ...(listen === undefined ? {} : { listen }),
        };
        command(
          selection,
          "serve",
          "text",
          lazily(async () => (await import("./handlers/serve.js")).serveCommand, options),
          flags,
        );
      },
    )
    .command(
      "upload [path]",
      "Send a bundle to a distributor serve endpoint for a pipeline to publish",
      (y) =>
        y
          .usage(
            "Usage:\n  distributor upload --server <url> --pipeline <id> [--token-env <NAME>] [--idempotency-key <key>] [--wait] [--sign <key-file>] [--signature-namespace <ns>] [--format text|json] <bundle-path>",
          )
          .positional("path", {
            type: "string",
            describe: "Bundle directory (holding manifest.json) to upload",
          })
          .option("server", {
            type: "string",
            describe: "Base URL of the upload server, e.g. https://publish.example.com (required)",
          })
          .option("pipeline", {
            type: "string",
            describe: "Pipeline whose http_upload source receives the bundle (required)",
          })
          .option("token-env", {
            type: "string",
            describe: `Environment variable holding the upload token (default ${DEFAULT_UPLOAD_TOKEN_ENV})`,
          })
          .option("idempotency-key", {
            type: "string",
            describe:
              "Key that makes a repeated upload return the first one's run (1-255 visible ASCII; default: generated)",
          })
          .option("wait", {
            type: "boolean",
            describe: "Wait for the run to finish; the exit status is then 1 when it failed",
          })
          .option("sign", signOption)
          .option("signature-namespace", signatureNamespaceOption)
          .option("format", formatOption)
          .epilog(
            "The bundle is validated locally first (manifest, sizes, sha256, no unlisted files or\n" +
              "symlinks), then streamed as a gzip tar archive. A 503 or a broken connection is retried\n" +
              "with the same idempotency key, honouring Retry-After. Without --wait the command succeeds\n" +
              "once the server has accepted the upload. --sign first signs the manifest into\n" +
              "manifest.json.sig in the bundle directory (as manifest create --sign does); a\n" +
              "manifest.json.sig already there is sent either way.",
          ),
      (argv) => {
        const flags = argv as RawFlags;
        const options = uploadOptions(flags);
        const format = outputFormat(flags);
        command(
          selection,
          "upload",
          format,
          lazily(async () => (await import("./handlers/upload.js")).uploadCommand, options),
          flags,
        );
      },
    );
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
        command(selection, "version", "text", lazily(loadVersion, {}), flags);
        return;
      }
      selection.helpFor = [];
    },
  );
}

const loadVersion = async () => (await import("./handlers/version.js")).versionCommand;

/** `--adopt` or `--rebuild` of `reconcile-state`: at most one, and not with `--all-owners`. */
function adoptionMode(flags: RawFlags): { mode?: "adopt" | "rebuild" } {
  const adopt = booleanFlag(flags, "adopt");
  const rebuild = booleanFlag(flags, "rebuild");
  if (adopt && rebuild)
    throw new UsageError("reconcile-state accepts --adopt or --rebuild, not both");
  if ((adopt || rebuild) && booleanFlag(flags, "all-owners")) {
    throw new UsageError(
      `reconcile-state --${adopt ? "adopt" : "rebuild"} works for the selected owner only and does not accept --all-owners`,
    );
  }
  if (adopt) return { mode: "adopt" };
  return rebuild ? { mode: "rebuild" } : {};
}

function planOutFlag(flags: RawFlags): { planOut?: string } {
  const value = optionalString(flags, "plan-out");
  if (value === undefined) return {};
  if (booleanFlag(flags, "dry-run")) {
    throw new UsageError(
      "run accepts --plan-out or --dry-run, not both (--plan-out writes nothing else)",
    );
  }
  if (booleanFlag(flags, "force")) {
    throw new UsageError(
      "run accepts --plan-out or --force, not both: a forced replacement deletes whatever is below the bundle path when it runs, which a saved plan cannot show for review — run with --force directly",
    );
  }
  return { planOut: value };
}

function applyOptions(flags: RawFlags): ApplyCommandOptions {
  if (extraPositionals(flags, 1).length > 0) throw new UsageError("apply accepts one plan file");
  const planPath = flags.plan;
  if (planPath === undefined) throw new UsageError("apply requires a plan file");
  if (typeof planPath !== "string" || planPath === "") {
    throw new UsageError("plan file must not be empty");
  }
  const configPath = optionalString(flags, "config");
  return {
    planPath,
    ...(configPath === undefined ? {} : { configPath }),
    dryRun: booleanFlag(flags, "dry-run"),
    ...lockTimeoutFlag(flags),
    ...maxAgeFlag(flags),
    quiet: booleanFlag(flags, "quiet"),
  };
}

/** `apply --max-age` when given; parsed by the handler, which has the duration parser loaded. */
function maxAgeFlag(flags: RawFlags): { maxAge?: string } {
  const value = optionalString(flags, "max-age");
  return value === undefined ? {} : { maxAge: value };
}

function validateOptions(flags: RawFlags): ValidateCommandOptions {
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("validate accepts one path");
  }
  const selected = sourceSelection(flags, "validate");
  const allowedSigners = optionalString(flags, "allowed-signers");
  const signatureNamespace = optionalString(flags, "signature-namespace");
  if (selected.kind === "config") {
    if (allowedSigners !== undefined || signatureNamespace !== undefined) {
      throw new UsageError(
        "validate --config checks signatures as the pipeline's source.signatures says; --allowed-signers and --signature-namespace go with a path",
      );
    }
    return selected;
  }
  if (signatureNamespace !== undefined && allowedSigners === undefined) {
    throw new UsageError("validate --signature-namespace needs --allowed-signers <file>");
  }
  return {
    ...selected,
    ...(allowedSigners === undefined ? {} : { allowedSigners }),
    ...(signatureNamespace === undefined ? {} : { signatureNamespace }),
  };
}

function inspectOptions(flags: RawFlags): InspectCommandOptions {
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("inspect accepts one path");
  }
  const destinationId = optionalString(flags, "destination");
  if (destinationId === undefined) return sourceSelection(flags, "inspect");
  if (optionalString(flags, "bundle") !== undefined) {
    throw new UsageError("inspect accepts --bundle or --destination, not both");
  }
  const selected = sourceSelection(flags, "inspect");
  if (selected.kind !== "config") throw new UsageError("inspect requires --config");
  return {
    kind: "destination",
    configPath: selected.configPath,
    pipelineId: selected.pipelineId,
    destinationId,
  };
}

/** The two forms of `validate` and `inspect`: a local path, or a configured pipeline's source. */
function sourceSelection(
  flags: RawFlags,
  name: string,
):
  | { kind: "path"; path: string }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string } {
  const path = positionalPath(flags);
  const configPath = optionalString(flags, "config");
  const wantsConfig =
    configPath !== undefined ||
    flags.pipeline !== undefined ||
    flags.bundle !== undefined ||
    flags.destination !== undefined;
  if (path !== undefined && wantsConfig) {
    throw new UsageError(`${name} accepts a path or --config, not both`);
  }
  if (!wantsConfig) {
    if (path === undefined) throw new UsageError(`${name} requires a path or --config`);
    return { kind: "path", path };
  }
  if (configPath === undefined) throw new UsageError(`${name} requires --config`);
  const pipelineId = requiredString(flags, "pipeline", name);
  const bundlePath = optionalString(flags, "bundle");
  return bundlePath === undefined
    ? { kind: "config", configPath, pipelineId }
    : { kind: "config", configPath, pipelineId, bundlePath };
}

function manifestCreateOptions(flags: RawFlags): ManifestCreateCommandOptions {
  const subcommand = flags.subcommand;
  if (subcommand === undefined) throw new UsageError("manifest requires a subcommand: create");
  if (!MANIFEST_SUBCOMMANDS.includes(String(subcommand))) {
    throw new UsageError(`unknown command ${JSON.stringify(`manifest ${String(subcommand)}`)}`);
  }
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("manifest create accepts one bundle path");
  }
  const id = requiredString(flags, "id", "manifest create");
  const path = positionalPath(flags);
  if (path === undefined) throw new UsageError("manifest create requires a bundle path");
  const created = optionalString(flags, "created");
  const force = booleanFlag(flags, "force");
  const maxFiles = optionalString(flags, "max-files");
  if (
    maxFiles !== undefined &&
    (!/^[1-9]\d*$/.test(maxFiles) || !Number.isSafeInteger(Number(maxFiles)))
  ) {
    throw new UsageError(
      `manifest create --max-files must be a whole number of files greater than zero (such as 200000), got ${JSON.stringify(maxFiles)}`,
    );
  }
  return {
    path,
    id,
    force,
    ...(created === undefined ? {} : { created }),
    ...(maxFiles === undefined ? {} : { maxFiles: Number(maxFiles) }),
    ...signingOptions(flags, "manifest create"),
  };
}

const signOption = {
  type: "string",
  describe:
    "Sign the manifest with this SSH key into manifest.json.sig (ssh-keygen -Y sign -f: a private key, or the .pub of a key an ssh-agent holds)",
} as const;
const signatureNamespaceOption = {
  type: "string",
  describe: "SSHSIG namespace of --sign (default: distributor)",
} as const;

/** `--sign` and `--signature-namespace`, which only means something beside `--sign`. */
function signingOptions(
  flags: RawFlags,
  command: string,
): { sign?: string; signatureNamespace?: string } {
  const sign = optionalString(flags, "sign");
  const signatureNamespace = optionalString(flags, "signature-namespace");
  if (signatureNamespace !== undefined && sign === undefined) {
    throw new UsageError(`${command} --signature-namespace needs --sign <key-file>`);
  }
  return {
    ...(sign === undefined ? {} : { sign }),
    ...(signatureNamespace === undefined ? {} : { signatureNamespace }),
  };
}

/** `--token-env` of `upload` when the flag is omitted. */
export const DEFAULT_UPLOAD_TOKEN_ENV = "DISTRIBUTOR_UPLOAD_TOKEN";

function uploadOptions(flags: RawFlags): UploadCommandOptions {
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("upload accepts one bundle path");
  }
  const server = requiredString(flags, "server", "upload");
  const pipelineId = requiredString(flags, "pipeline", "upload");
  const path = positionalPath(flags);
  if (path === undefined) throw new UsageError("upload requires a bundle path");
  let url: URL | undefined;
  try {
    url = new URL(server);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new UsageError(
      `upload --server must be an http or https URL, got ${JSON.stringify(server)}`,
    );
  }
  const tokenEnv = optionalString(flags, "token-env") ?? DEFAULT_UPLOAD_TOKEN_ENV;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(tokenEnv)) {
    throw new UsageError(
      `upload --token-env must name an environment variable, got ${JSON.stringify(tokenEnv)}`,
    );
  }
  const idempotencyKey = optionalString(flags, "idempotency-key");
  return {
    server,
    pipelineId,
    tokenEnv,
    wait: booleanFlag(flags, "wait"),
    path,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    ...signingOptions(flags, "upload"),
  };
}

function positionalPath(flags: RawFlags): string | undefined {
  const path = flags.path;
  if (path === undefined) return undefined;
  if (typeof path !== "string" || path === "") throw new UsageError("path must not be empty");
  return path;
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
