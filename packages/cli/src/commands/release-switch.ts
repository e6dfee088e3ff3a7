import { UsageError } from "../errors.js";
import { booleanFlag, optionalString, type RawFlags, requiredString } from "../flags.js";
import { lockTimeout } from "./options.js";
import type { RollbackCommandOptions } from "./rollback/options.js";

/**
 * The options `rollback` and `promote` share — the destination, the target release and how it is
 * checked — and whether `alternative` (`--previous`, `--latest`) was given in place of `--to`:
 * exactly one of the two is required.
 */
export function releaseSwitchOptions(
  flags: RawFlags,
  command: "rollback" | "promote",
  alternative: "previous" | "latest",
): { options: RollbackCommandOptions; alternative: boolean } {
  const configPath = requiredString(flags, "config", command);
  const pipelineId = requiredString(flags, "pipeline", command);
  const destinationId = requiredString(flags, "destination", command);
  const to = optionalString(flags, "to");
  const chosen = booleanFlag(flags, alternative);
  if ((to === undefined) === !chosen) {
    throw new UsageError(`${command} requires exactly one of --to <release> or --${alternative}`);
  }
  const bundlePath = optionalString(flags, "bundle-path");
  const options: RollbackCommandOptions = {
    configPath,
    pipelineId,
    destinationId,
    dryRun: booleanFlag(flags, "dry-run"),
    verify: booleanFlag(flags, "verify"),
    force: booleanFlag(flags, "force"),
    ...(to === undefined ? {} : { to }),
    ...(bundlePath === undefined ? {} : { bundlePath }),
    ...lockTimeout(flags),
  };
  return { options, alternative: chosen };
}
