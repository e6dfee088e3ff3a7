import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { formatAdoptText, formatReconcileStateText } from "../../render/maintenance.js";
import { cliPackage } from "../../version.js";
import { lockTimeoutMs } from "../lock-timeout.js";
import type { ReconcileStateCommandOptions } from "./options.js";

export const reconcileStateCommand: CommandHandler<ReconcileStateCommandOptions> = async (
  options,
  context,
) => {
  const config = await publish.loadConfig(options.configPath);
  const common = {
    config,
    pipelineId: options.pipelineId,
    destinationId: options.destinationId,
    dryRun: options.dryRun,
    ...(options.bundlePath === undefined ? {} : { bundlePath: options.bundlePath }),
    lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
    backends: context.backends,
    signal: context.signal,
  };
  if (options.mode !== undefined) {
    const report = await publish.adoptOutputs({
      ...common,
      mode: options.mode,
      distributorVersion: (await cliPackage()).version,
    });
    const text = formatAdoptText(report);
    if (!report.failed) return { ok: true, result: report, text };
    const refused = report.bundles.filter((bundle) => bundle.error !== null);
    return {
      ok: false,
      result: report,
      text,
      error: {
        code: refused[0]?.error?.code ?? "failed",
        message: refused[0]?.error?.message ?? "reconcile-state failed",
      },
      diagnostics: refused.map((bundle) => bundle.error?.message ?? ""),
    };
  }
  const report = await publish.reconcileState({ ...common, allOwners: options.allOwners });
  return { ok: true, result: report, text: [formatReconcileStateText(report)] };
};
