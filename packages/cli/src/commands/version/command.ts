import type { CommandContext, CommandOutcome } from "../../command.js";
import { outputFormat, rejectPositionals } from "../../flags.js";
import { formatFlag } from "../options.js";
import { defineCommand } from "../spec.js";

const load = async () => (await import("./handler.js")).versionCommand;

export const version = defineCommand<Record<string, never>>({
  command: "version",
  name: "version",
  describe: "Print the distributor version",
  usage: "Usage:\n  distributor version [--format text|json]",
  flags: { format: formatFlag },
  parse(flags) {
    rejectPositionals(flags, "version", 1);
    return { format: outputFormat(flags), options: {} };
  },
  load,
});

/** `distributor --version`: the version command, as text. */
export async function printVersion(context: CommandContext): Promise<CommandOutcome> {
  return (await load())({}, context);
}
