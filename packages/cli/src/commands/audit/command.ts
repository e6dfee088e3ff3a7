import {
  booleanFlag,
  optionalString,
  outputFormat,
  type RawFlags,
  rejectPositionals,
  stringList,
} from "../../flags.js";
import { DEFAULT_CONFIG_PATH, defaultConfigFlag, formatFlag } from "../options.js";
import { defineCommand } from "../spec.js";
import type { AuditCommandOptions } from "./options.js";

export const audit = defineCommand<AuditCommandOptions>({
  command: "audit",
  name: "audit",
  describe: "Compare the size and SHA-256 of every managed output with its destination state",
  usage:
    "Usage:\n  distributor audit [--config <path>] [--pipeline <id>]... [--destination <id>] [--release all|current] [--quiet] [--format text|json]",
  flags: {
    config: defaultConfigFlag,
    pipeline: {
      type: "string",
      array: true,
      describe: "Audit only this pipeline; repeat the flag for several (default: every pipeline)",
    },
    destination: {
      type: "string",
      describe: "Audit only the destination with this id (of each selected pipeline)",
    },
    release: {
      type: "string",
      choices: ["all", "current"],
      describe:
        "Under layout: releases, which committed releases are checked against what identified their files when committed (default: all)",
    },
    // Audit draws no summary line, unlike run and apply.
    quiet: {
      type: "boolean",
      describe: "Draw no progress on stderr (drawn only when stderr is a terminal)",
    },
    format: formatFlag,
  },
  epilog:
    "Reads only: takes no lease and writes nothing. Exit status 1 when a managed output is\n" +
    "missing or changed, or a state file is invalid; unmanaged entries are reported only.\n" +
    "Under layout: releases every kept release is checked too (an edit in place reaches every\n" +
    "release sharing the file), so that a rollback target that changed is found before it is\n" +
    "needed. Restore what drifted with `distributor run --repair`.",
  parse(flags) {
    rejectPositionals(flags, "audit", 1);
    const format = outputFormat(flags);
    return { format, options: auditOptions(flags) };
  },
  load: async () => (await import("./handler.js")).auditCommand,
});

function auditOptions(flags: RawFlags): AuditCommandOptions {
  const destinationId = optionalString(flags, "destination");
  return {
    configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
    pipelineIds: stringList(flags, "pipeline"),
    ...(destinationId === undefined ? {} : { destinationId }),
    quiet: booleanFlag(flags, "quiet"),
    releases: optionalString(flags, "release") === "current" ? "current" : "all",
  };
}
