import { UsageError } from "../../errors.js";
import { extraPositionals, optionalString, outputFormat, type RawFlags } from "../../flags.js";
import { formatFlag, sourceSelection } from "../options.js";
import { defineCommand } from "../spec.js";
import type { InspectCommandOptions } from "./options.js";

export const inspect = defineCommand<InspectCommandOptions>({
  command: "inspect [path]",
  name: "inspect",
  describe: "Show a bundle's manifest and files, or a destination's state",
  usage:
    "Usage:\n  distributor inspect [--format text|json] <path>\n" +
    "  distributor inspect --config <path> --pipeline <id> [--bundle <path> | --destination <id>] [--format text|json]",
  positionals: {
    path: {
      type: "string",
      describe:
        "Local bundle directory, directory of bundles, or destination directory holding .distributor.json",
    },
  },
  flags: {
    config: { type: "string", describe: "Configuration file naming the pipeline" },
    pipeline: { type: "string", describe: "Pipeline to inspect" },
    bundle: {
      type: "string",
      describe: "Only the source bundle at this path relative to the source root",
    },
    destination: {
      type: "string",
      describe: "Show the state of this destination instead of the source",
    },
    format: formatFlag,
  },
  epilog:
    "Inspect reads only; it reports what it finds, including files whose size or sha256 differ\n" +
    "from the manifest.",
  parse(flags) {
    const options = inspectOptions(flags);
    return { format: outputFormat(flags), options };
  },
  load: async () => (await import("./handler.js")).inspectCommand,
});

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
