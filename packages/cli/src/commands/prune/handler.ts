import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { formatPruneBundleLines, formatPruneText } from "../../render/maintenance.js";
import { lockTimeoutMs } from "../lock-timeout.js";
import type { PruneCommandOptions } from "./options.js";

export const pruneCommand: CommandHandler<PruneCommandOptions> = async (options, context) => {
  const config = await publish.loadConfig(options.configPath);
  try {
    const report = await publish.prune({
      config,
      pipelineId: options.pipelineId,
      destinationId: options.destinationId,
      dryRun: options.dryRun,
      lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
      backends: context.backends,
      signal: context.signal,
    });
    return {
      ok: true,
      result: report,
      text: [formatPruneText(report), ...formatPruneBundleLines(report)],
      warnings: report.warnings.map((warning) => warning.message),
    };
  } catch (error) {
    // A prune that stopped part-way still reports what it deleted and what it kept.
    if (!publish.isPruneError(error)) throw error;
    return {
      ok: false,
      result: error.report,
      text: [formatPruneText(error.report), ...formatPruneBundleLines(error.report)],
      warnings: error.report.warnings.map((warning) => warning.message),
      error: { code: publish.errorCode(error), message: error.message },
    };
  }
};
