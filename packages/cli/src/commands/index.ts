import { apply } from "./apply/command.js";
import { audit } from "./audit/command.js";
import { inspect } from "./inspect/command.js";
import { manifestCreate } from "./manifest-create/command.js";
import { promote } from "./promote/command.js";
import { prune } from "./prune/command.js";
import { reconcileState } from "./reconcile-state/command.js";
import { rollback } from "./rollback/command.js";
import { run } from "./run/command.js";
import { serve } from "./serve/command.js";
import type { CommandModule } from "./spec.js";
import { upload } from "./upload/command.js";
import { validate } from "./validate/command.js";
import { version } from "./version/command.js";

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
