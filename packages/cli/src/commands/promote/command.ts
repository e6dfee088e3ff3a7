import { outputFormat, rejectPositionals } from "../../flags.js";
import { formatFlag, lockTimeoutFlag, requiredConfigFlag } from "../options.js";
import { releaseSwitchOptions } from "../release-switch.js";
import { defineCommand } from "../spec.js";
import type { PromoteCommandOptions } from "./options.js";

export const promote = defineCommand<PromoteCommandOptions>({
  command: "promote",
  name: "promote",
  describe: "Make a staged release of a layout: releases destination live",
  usage:
    "Usage:\n  distributor promote --config <path> --pipeline <id> --destination <id> (--to <release>|--latest) [--bundle-path <path>] [--verify] [--force] [--dry-run] [--lock-timeout <duration>] [--format text|json]",
  flags: {
    config: requiredConfigFlag,
    pipeline: { type: "string", describe: "Pipeline that publishes to the destination (required)" },
    destination: {
      type: "string",
      describe: "Destination with layout: releases whose staged release goes live (required)",
    },
    to: {
      type: "string",
      describe: "Staged release id to make live (as `distributor run --stage` reported it)",
    },
    latest: {
      type: "boolean",
      describe: "Make the newest staged release live",
    },
    "bundle-path": {
      type: "string",
      describe:
        "Destination bundle path (default: the destination root, as path_mapping fixed uses)",
    },
    verify: {
      type: "boolean",
      describe:
        "Check every file of the target against its committed digest (default: the identity each file had when the release was staged)",
    },
    force: {
      type: "boolean",
      describe:
        "Make the target live even if its files changed since it was staged (the report lists them)",
    },
    "dry-run": {
      type: "boolean",
      describe: "Check the target and report the release it would make live; change nothing",
    },
    "lock-timeout": lockTimeoutFlag,
    format: formatFlag,
  },
  epilog:
    "Exactly one of --to or --latest is required. A staged release is one `distributor run\n" +
    "--stage` (or releases.promote: manual) committed without making it live: newer than the\n" +
    "live release. The state becomes its committed state and `current` is switched to it, with\n" +
    "rollback's checks: a release whose files changed since it was staged is refused with\n" +
    "release_drift, naming the files, unless --force. Nothing is written or copied, so the bytes\n" +
    "that go live are the bytes that were looked at. `distributor rollback --previous` returns\n" +
    "to the release that was live before.",
  parse(flags) {
    rejectPositionals(flags, "promote", 1);
    const format = outputFormat(flags);
    const { options, alternative } = releaseSwitchOptions(flags, "promote", "latest");
    return { format, options: { ...options, latest: alternative } };
  },
  load: async () => (await import("./handler.js")).promoteCommand,
});
