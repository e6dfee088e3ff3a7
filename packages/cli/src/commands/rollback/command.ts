import { outputFormat, rejectPositionals } from "../../flags.js";
import { formatFlag, lockTimeoutFlag, requiredConfigFlag } from "../options.js";
import { releaseSwitchOptions } from "../release-switch.js";
import { defineCommand } from "../spec.js";
import type { RollbackCommandOptions } from "./options.js";

export const rollback = defineCommand<RollbackCommandOptions>({
  command: "rollback",
  name: "rollback",
  describe: "Switch a layout: releases destination back to an earlier release",
  usage:
    "Usage:\n  distributor rollback --config <path> --pipeline <id> --destination <id> (--to <release>|--previous) [--bundle-path <path>] [--verify] [--force] [--dry-run] [--lock-timeout <duration>] [--format text|json]",
  flags: {
    config: requiredConfigFlag,
    pipeline: { type: "string", describe: "Pipeline that publishes to the destination (required)" },
    destination: {
      type: "string",
      describe: "Destination with layout: releases whose current release changes (required)",
    },
    to: {
      type: "string",
      describe: "Release id to return to (as `distributor inspect` lists them)",
    },
    previous: {
      type: "boolean",
      describe:
        "Return to the newest release before the current one that went live with another source (never a staged release that was not made live)",
    },
    "bundle-path": {
      type: "string",
      describe:
        "Destination bundle path (default: the destination root, as path_mapping fixed uses)",
    },
    verify: {
      type: "boolean",
      describe:
        "Check every file of the target against its committed digest (default: the identity each file had when the release was committed)",
    },
    force: {
      type: "boolean",
      describe:
        "Switch to the target even if its files changed since it was committed (the report lists them)",
    },
    "dry-run": {
      type: "boolean",
      describe: "Check the target and report the release it would switch to; change nothing",
    },
    "lock-timeout": lockTimeoutFlag,
    format: formatFlag,
  },
  epilog:
    "Exactly one of --to or --previous is required. The state becomes the chosen release's\n" +
    "committed state and the `current` link is switched to it; no output is written or copied.\n" +
    "The target is checked first: a release whose files changed since it was committed (an\n" +
    "edit in place reaches every release sharing a hard link) is refused with release_drift,\n" +
    "naming the files, unless --force. The next run of the source that release published skips.",
  parse(flags) {
    rejectPositionals(flags, "rollback", 1);
    const format = outputFormat(flags);
    return { format, options: releaseSwitchOptions(flags, "rollback", "previous").options };
  },
  load: async () => (await import("./handler.js")).rollbackCommand,
});
