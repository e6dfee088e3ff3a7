import { UsageError } from "../../errors.js";
import {
  booleanFlag,
  optionalString,
  outputFormat,
  type RawFlags,
  rejectPositionals,
  requiredString,
} from "../../flags.js";
import { formatFlag, lockTimeout, lockTimeoutFlag, requiredConfigFlag } from "../options.js";
import { defineCommand } from "../spec.js";
import type { ReconcileStateCommandOptions } from "./options.js";

export const reconcileState = defineCommand<ReconcileStateCommandOptions>({
  command: "reconcile-state",
  name: "reconcile-state",
  describe: "Drop state records of managed outputs that no longer exist at a destination",
  usage:
    "Usage:\n  distributor reconcile-state --config <path> --pipeline <id> --destination <id> [--all-owners | --adopt | --rebuild] [--bundle-path <path>] [--dry-run] [--lock-timeout <duration>] [--format text|json]",
  flags: {
    config: requiredConfigFlag,
    pipeline: {
      type: "string",
      describe: "Pipeline that selects the destination root (required)",
    },
    destination: { type: "string", describe: "Destination whose root is repaired (required)" },
    "all-owners": {
      type: "boolean",
      describe: "In a shared root, repair the records of every owner, not only this destination's",
    },
    adopt: {
      type: "boolean",
      describe:
        "Record unmanaged files whose path and bytes equal an output the current source publishes there (writes only the state)",
    },
    rebuild: {
      type: "boolean",
      describe:
        "Replace an unreadable or invalid state with one rebuilt from the current source and the bytes present (never deletes)",
    },
    "bundle-path": {
      type: "string",
      describe:
        "Destination bundle path whose state is maintained (default: the destination root; a preserve_relative destination keeps one state per bundle path)",
    },
    "dry-run": {
      type: "boolean",
      describe: "Report the repair without rewriting .distributor.json",
    },
    "lock-timeout": lockTimeoutFlag,
    format: formatFlag,
  },
  epilog:
    "Unmanaged entries are reported, never deleted or adopted; output digests are not checked.",
  parse(flags) {
    rejectPositionals(flags, "reconcile-state", 1);
    const format = outputFormat(flags);
    return { format, options: reconcileStateOptions(flags) };
  },
  load: async () => (await import("./handler.js")).reconcileStateCommand,
});

function reconcileStateOptions(flags: RawFlags): ReconcileStateCommandOptions {
  return {
    configPath: requiredString(flags, "config", "reconcile-state"),
    pipelineId: requiredString(flags, "pipeline", "reconcile-state"),
    destinationId: requiredString(flags, "destination", "reconcile-state"),
    allOwners: booleanFlag(flags, "all-owners"),
    ...adoptionMode(flags),
    ...bundlePathOf(flags),
    dryRun: booleanFlag(flags, "dry-run"),
    ...lockTimeout(flags),
  };
}

function bundlePathOf(flags: RawFlags): { bundlePath?: string } {
  const bundlePath = optionalString(flags, "bundle-path");
  return bundlePath === undefined ? {} : { bundlePath };
}

/** `--adopt` or `--rebuild`: at most one, and not with `--all-owners`. */
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
