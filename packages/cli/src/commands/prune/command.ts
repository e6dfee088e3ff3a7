import { UsageError } from "../../errors.js";
import {
  booleanFlag,
  outputFormat,
  type RawFlags,
  rejectPositionals,
  requiredString,
} from "../../flags.js";
import { formatFlag, lockTimeout, lockTimeoutFlag, requiredConfigFlag } from "../options.js";
import { defineCommand } from "../spec.js";
import type { PruneCommandOptions } from "./options.js";

export const prune = defineCommand<PruneCommandOptions>({
  command: "prune",
  name: "prune",
  describe: "Delete managed outputs selected by the destination's retention policy",
  usage:
    "Usage:\n  distributor prune --config <path> --pipeline <id> --destination <id> (--dry-run|--apply) [--lock-timeout <duration>] [--format text|json]",
  flags: {
    config: requiredConfigFlag,
    pipeline: {
      type: "string",
      describe: "Pipeline that selects the destination root and owner (required)",
    },
    destination: {
      type: "string",
      describe: "Destination whose retention.prune policy applies (required)",
    },
    "dry-run": {
      type: "boolean",
      describe: "Report the outputs that would be deleted; change nothing",
    },
    apply: {
      type: "boolean",
      describe: "Delete the planned outputs, then rewrite .distributor.json",
    },
    "lock-timeout": lockTimeoutFlag,
    format: formatFlag,
  },
  epilog:
    "Exactly one of --dry-run or --apply is required. Only managed outputs are deleted;\n" +
    "unmanaged files and .distributor.json stay.",
  parse(flags) {
    rejectPositionals(flags, "prune", 1);
    const format = outputFormat(flags);
    return { format, options: pruneOptions(flags) };
  },
  load: async () => (await import("./handler.js")).pruneCommand,
});

function pruneOptions(flags: RawFlags): PruneCommandOptions {
  const configPath = requiredString(flags, "config", "prune");
  const pipelineId = requiredString(flags, "pipeline", "prune");
  const destinationId = requiredString(flags, "destination", "prune");
  const dryRun = booleanFlag(flags, "dry-run");
  if (dryRun === booleanFlag(flags, "apply")) {
    throw new UsageError("prune requires exactly one of --dry-run or --apply");
  }
  return {
    configPath,
    pipelineId,
    destinationId,
    dryRun,
    ...lockTimeout(flags),
  };
}
