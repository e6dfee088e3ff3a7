import { apply } from "./apply.js";
import { audit } from "./audit.js";
import { inspect } from "./inspect.js";
import { manifestCreate } from "./manifest-create.js";
import { promote } from "./promote.js";
import { prune } from "./prune.js";
import { reconcileState } from "./reconcile-state.js";
import { rollback } from "./rollback.js";
import { run } from "./run.js";
import { serve } from "./serve.js";
import type { CommandModule } from "./spec.js";
import { upload } from "./upload.js";
import { validate } from "./validate.js";
import { version } from "./version.js";

/**
 * Every command the parser declares, in the order `distributor --help` lists them; the command
 * names, the switches and completion all come from here.
 */
export const COMMANDS: readonly CommandModule[] = [
  version,
  run,
  apply,
  validate,
  inspect,
  manifestCreate,
  reconcileState,
  prune,
  rollback,
  promote,
  audit,
  serve,
  upload,
];

/** The first word of a command: `manifest` of `manifest [subcommand] [path]`. */
export function commandWord(command: CommandModule): string {
  return command.command.split(" ")[0] ?? command.command;
}

/** Every word `distributor <word>` accepts: the parser's own `help` and `completion`, then the commands'. */
export const COMMAND_NAMES: readonly string[] = [
  "help",
  "completion",
  ...COMMANDS.map(commandWord),
];

/** Flags that take no value, of any command. */
export function commandSwitches(): string[] {
  return COMMANDS.flatMap((command) =>
    Object.entries(command.flags)
      .filter(([, flag]) => flag.type === "boolean")
      .map(([name]) => name),
  );
}
