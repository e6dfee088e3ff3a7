import type { CommandHandler, ReconcileStateCommandOptions } from "../command.js";
import { formatReconcileStateText } from "../render/maintenance.js";
import { lockTimeoutMs } from "./lock-timeout.js";

export const reconcileStateCommand: CommandHandler<ReconcileStateCommandOptions> = async (
  options,
  context,
) => {
  const publish = await import("@distributor/publish");
  const config = await publish.loadConfig(options.configPath);
  const report = await publish.reconcileState({
    config,
    pipelineId: options.pipelineId,
    destinationId: options.destinationId,
    allOwners: options.allOwners,
    dryRun: options.dryRun,
    lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
    backends: context.backends,
    signal: context.signal,
  });
  return { ok: true, result: report, text: [formatReconcileStateText(report)] };
};
