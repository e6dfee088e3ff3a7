import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { formatRollbackText } from "../../render/maintenance.js";
import { lockTimeoutMs } from "../lock-timeout.js";
import type { RollbackCommandOptions } from "./options.js";

export const rollbackCommand: CommandHandler<RollbackCommandOptions> = async (options, context) => {
  const config = await publish.loadConfig(options.configPath);
  const report = await publish.rollback({
    config,
    pipelineId: options.pipelineId,
    destinationId: options.destinationId,
    bundlePath: options.bundlePath,
    to: options.to,
    dryRun: options.dryRun,
    verify: options.verify,
    force: options.force,
    lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
    backends: context.backends,
    signal: context.signal,
  });
  return { ok: true, result: report, text: [formatRollbackText(report)] };
};
