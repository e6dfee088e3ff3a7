import { resolve } from "node:path";
import type { RunReport } from "@distributor/publish";
import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { UsageError } from "../../errors.js";
import { planLines } from "../../render/plan.js";
import { leaseTtlMs } from "../../test-seams.js";
import { cliPackage } from "../../version.js";
import { lockTimeoutMs } from "../lock-timeout.js";
import { terminalProgress } from "../progress.js";
import { runOutcome } from "../run/handler.js";
import type { ApplyCommandOptions } from "./options.js";

export const applyCommand: CommandHandler<ApplyCommandOptions> = async (options, context) => {
  const ttlMs = leaseTtlMs(context.io.env);
  const timeout = lockTimeoutMs(publish.parseDuration, options.lockTimeout);
  const maxAgeMs = maxAge(publish.parseDuration, options.maxAge);
  const plan = await publish.loadPlan(options.planPath);
  // The plan names the configuration it was made from (absolute); --config chooses another.
  const config = await publish.loadConfig(options.configPath ?? resolve(plan.config_path));
  const progress = terminalProgress(context.io, !options.quiet && !options.dryRun);
  let report: RunReport;
  try {
    report = await publish.applyPlan({
      plan,
      config,
      planName: options.planPath,
      dryRun: options.dryRun,
      distributorVersion: (await cliPackage()).version,
      backends: context.backends,
      signal: context.signal,
      ...(timeout === undefined ? {} : { lockTimeoutMs: timeout }),
      ...(maxAgeMs === undefined ? {} : { maxAgeMs }),
      ...(ttlMs === undefined ? {} : { lease: { ttlMs } }),
      ...(progress ? { onEvent: progress.onEvent } : {}),
    });
  } catch (error) {
    progress?.stop();
    throw error;
  }
  progress?.finish(report);
  const outcome = runOutcome(report, publish.runSucceeded(report));
  const result: Record<string, unknown> = { ...report, plan_file: options.planPath };
  if (options.dryRun) {
    result.plan = plan;
    outcome.text = planLines(plan, options.planPath, report.actions);
  }
  outcome.result = result;
  return outcome;
};

/** `--max-age` in milliseconds; undefined for the library's default (24h). */
function maxAge(parse: (text: string) => number, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  try {
    ms = parse(value);
  } catch (error) {
    throw new UsageError(`--max-age ${JSON.stringify(value)}: ${(error as Error).message}`);
  }
  if (ms <= 0) throw new UsageError(`--max-age ${JSON.stringify(value)} must be positive`);
  return ms;
}
