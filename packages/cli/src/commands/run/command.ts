import { UsageError } from "../../errors.js";
import {
  booleanFlag,
  optionalString,
  outputFormat,
  type RawFlags,
  rejectPositionals,
  stringList,
} from "../../flags.js";
import {
  allowDeletes,
  allowDeletesFlag,
  DEFAULT_CONFIG_PATH,
  defaultConfigFlag,
  formatFlag,
  lockTimeout,
  lockTimeoutFlag,
  runQuietFlag,
} from "../options.js";
import { defineCommand } from "../spec.js";
import type { RunCommandOptions } from "./options.js";

export const run = defineCommand<RunCommandOptions>({
  command: "run",
  name: "run",
  describe: "Publish the bundles of configured pipelines to their destinations",
  usage:
    "Usage:\n  distributor run [--config <path>] [--pipeline <id>]... [--dry-run] [--force] [--repair] [--stage] [--allow-deletes <n>] [--lock-timeout <duration>] [--quiet] [--format text|json]\n" +
    "  distributor run [--config <path>] [--pipeline <id>]... [--repair] [--allow-deletes <n>] --plan-out <file> [--format text|json]",
  flags: {
    config: defaultConfigFlag,
    pipeline: {
      type: "string",
      array: true,
      describe: "Run only this pipeline; repeat the flag for several (default: every pipeline)",
    },
    "dry-run": {
      type: "boolean",
      describe: "Read sources and destinations and print the plan; write nothing anywhere",
    },
    force: {
      type: "boolean",
      describe:
        "Replace destination content that would otherwise fail as a conflict, as unmanaged, or as newer",
    },
    repair: {
      type: "boolean",
      describe:
        "Where the state already records the current source, restore managed outputs that are missing or changed (action repair)",
    },
    stage: {
      type: "boolean",
      describe:
        "Commit each release of a layout: releases destination without making it live (status staged, with its release id); `distributor promote` makes it live",
    },
    "allow-deletes": allowDeletesFlag,
    "plan-out": {
      type: "string",
      describe:
        "Plan as --dry-run does, print the plan for review and save it to this file (atomically) for `distributor apply`; nothing is written anywhere else",
    },
    "lock-timeout": lockTimeoutFlag,
    quiet: runQuietFlag,
    format: formatFlag,
  },
  epilog:
    "Pipelines run in configuration order. Each destination is planned and written on its own;\n" +
    "one failing destination does not stop the others, but makes the exit status 1.\n" +
    "With --plan-out the plan file is written only when every destination could be planned.",
  parse(flags) {
    rejectPositionals(flags, "run", 1);
    const format = outputFormat(flags);
    return { format, options: runOptions(flags) };
  },
  load: async () => (await import("./handler.js")).runCommand,
});

function runOptions(flags: RawFlags): RunCommandOptions {
  return {
    configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
    pipelineIds: stringList(flags, "pipeline"),
    dryRun: booleanFlag(flags, "dry-run"),
    force: booleanFlag(flags, "force"),
    repair: booleanFlag(flags, "repair"),
    stage: booleanFlag(flags, "stage"),
    ...allowDeletes(flags),
    ...planOut(flags),
    ...lockTimeout(flags),
    quiet: booleanFlag(flags, "quiet"),
  };
}

function planOut(flags: RawFlags): { planOut?: string } {
  const value = optionalString(flags, "plan-out");
  if (value === undefined) return {};
  if (booleanFlag(flags, "dry-run")) {
    throw new UsageError(
      "run accepts --plan-out or --dry-run, not both (--plan-out writes nothing else)",
    );
  }
  if (booleanFlag(flags, "stage")) {
    throw new UsageError(
      "run accepts --plan-out or --stage, not both: a saved plan is carried out as the destination's releases.promote says (manual stages it)",
    );
  }
  if (booleanFlag(flags, "force")) {
    throw new UsageError(
      "run accepts --plan-out or --force, not both: a forced replacement deletes whatever is below the bundle path when it runs, which a saved plan cannot show for review — run with --force directly",
    );
  }
  return { planOut: value };
}
