import { UsageError } from "../../errors.js";
import {
  booleanFlag,
  extraPositionals,
  optionalString,
  outputFormat,
  type RawFlags,
} from "../../flags.js";
import { formatFlag, lockTimeout, lockTimeoutFlag, runQuietFlag } from "../options.js";
import { defineCommand } from "../spec.js";
import type { ApplyCommandOptions } from "./options.js";

export const apply = defineCommand<ApplyCommandOptions>({
  command: "apply [plan]",
  name: "apply",
  describe: "Carry out a plan saved by `run --plan-out`, or refuse where a destination moved on",
  usage:
    "Usage:\n  distributor apply [--config <path>] [--dry-run] [--max-age <duration>] [--lock-timeout <duration>] [--quiet] [--format text|json] <plan-file>",
  positionals: { plan: { type: "string", describe: "Plan file written by run --plan-out" } },
  flags: {
    config: {
      type: "string",
      describe: "Configuration file (default: the one the plan was made from)",
    },
    "dry-run": {
      type: "boolean",
      describe:
        "Print the plan for review and check it against sources and destinations; write nothing anywhere",
    },
    "max-age": {
      type: "string",
      describe:
        "Refuse a plan made longer ago than this (Go duration: 30m, 2h; default 24h): its states record the plan's time as published_at",
    },
    "lock-timeout": lockTimeoutFlag,
    quiet: runQuietFlag,
    format: formatFlag,
  },
  epilog:
    "Per destination, apply takes the lease and plans again at the plan's time: only when that\n" +
    "gives exactly the saved plan (same state version, stored files, source digests and\n" +
    "configuration) does it write the saved outputs, state and deletes. Otherwise that\n" +
    "destination fails with error code plan_stale, source_changed or config_changed and none\n" +
    "of the plan is carried out there (a lease a dead run left is still recovered first, as\n" +
    "any run does); the others still apply. A plan older than --max-age fails as a whole\n" +
    "(plan_expired). Any failure makes the exit status 1.",
  parse(flags) {
    const format = outputFormat(flags);
    return { format, options: applyOptions(flags) };
  },
  load: async () => (await import("./handler.js")).applyCommand,
});

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
    ...lockTimeout(flags),
    ...maxAge(flags),
    quiet: booleanFlag(flags, "quiet"),
  };
}

/** `--max-age` when given; parsed by the handler, which has the duration parser loaded. */
function maxAge(flags: RawFlags): { maxAge?: string } {
  const value = optionalString(flags, "max-age");
  return value === undefined ? {} : { maxAge: value };
}
