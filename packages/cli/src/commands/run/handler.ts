import { resolve } from "node:path";
import type { RunActionReport, RunReport } from "@distributor/publish";
import * as publish from "@distributor/publish";
import type { CommandHandler, CommandOutcome } from "../../command.js";
import { planLines } from "../../render/plan.js";
import { summaryLine } from "../../render/text.js";
import { leaseTtlMs } from "../../test-seams.js";
import { cliPackage } from "../../version.js";
import { lockTimeoutMs } from "../lock-timeout.js";
import { terminalProgress } from "../progress.js";
import type { RunCommandOptions } from "./options.js";

export const runCommand: CommandHandler<RunCommandOptions> = async (options, context) => {
  if (options.planOut !== undefined) return planOutCommand(options, options.planOut, context);
  const ttlMs = leaseTtlMs(context.io.env);
  const config = await publish.loadConfig(options.configPath);
  const progress = terminalProgress(context.io, !options.quiet);
  let report: RunReport;
  try {
    report = await publish.run({
      config,
      pipelineIds: options.pipelineIds,
      dryRun: options.dryRun,
      force: options.force,
      repair: options.repair,
      ...(options.stage ? { stage: true } : {}),
      ...(options.allowDeletes === undefined ? {} : { allowDeletes: options.allowDeletes }),
      lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
      distributorVersion: (await cliPackage()).version,
      backends: context.backends,
      signal: context.signal,
      ...(ttlMs === undefined ? {} : { lease: { ttlMs } }),
      ...(progress ? { onEvent: progress.onEvent } : {}),
    });
  } catch (error) {
    progress?.stop();
    throw error;
  }
  progress?.finish(report);
  return runOutcome(report, publish.runSucceeded(report));
};

/**
 * `run --plan-out`: a dry run whose plan is printed for review and saved (atomically) for
 * `distributor apply`. An incomplete plan is never saved: the file is left as it was.
 */
async function planOutCommand(
  options: RunCommandOptions,
  file: string,
  context: Parameters<CommandHandler<RunCommandOptions>>[1],
): Promise<CommandOutcome> {
  const config = await publish.loadConfig(options.configPath);
  const progress = terminalProgress(context.io, !options.quiet);
  let planned: Awaited<ReturnType<typeof publish.planRun>>;
  try {
    planned = await publish.planRun({
      config,
      pipelineIds: options.pipelineIds,
      force: options.force,
      repair: options.repair,
      ...(options.allowDeletes === undefined ? {} : { allowDeletes: options.allowDeletes }),
      distributorVersion: (await cliPackage()).version,
      backends: context.backends,
      signal: context.signal,
      ...(progress ? { onEvent: progress.onEvent } : {}),
    });
  } catch (error) {
    progress?.stop();
    throw error;
  }
  const { report, plan } = planned;
  progress?.finish(report);
  if (plan === null) {
    const outcome = runOutcome(report, false);
    outcome.result = { ...report, plan_file: null };
    const failed = outcome.error ?? { code: "plan_incomplete", message: "planning failed" };
    outcome.error = {
      code: failed.code === "destination_failed" ? "plan_incomplete" : failed.code,
      message: `no plan written to ${file}: ${failed.message}`,
    };
    outcome.diagnostics = [...(outcome.diagnostics ?? []), outcome.error.message];
    return outcome;
  }
  // Recorded absolute, so that `apply` finds the same file from any working directory.
  plan.config_path = resolve(options.configPath);
  await publish.savePlan(file, plan);
  const outcome = runOutcome(report, publish.runSucceeded(report));
  outcome.result = { ...report, plan_file: file };
  outcome.text = [
    ...planLines(plan, file),
    `Plan written to ${file}; apply it with: distributor apply ${file}`,
  ];
  return outcome;
}

export function runOutcome(report: RunReport, ok: boolean): CommandOutcome {
  const outcome: CommandOutcome = {
    ok,
    result: report,
    text: report.actions.map(actionLine),
    warnings: [
      ...report.warnings.map(
        (w) => `pipeline ${w.pipeline_id} bundle ${w.bundle_path}: ${w.message}`,
      ),
      ...report.actions.flatMap((a) =>
        a.warnings.map(
          (w) =>
            `pipeline ${a.pipeline_id} destination ${a.destination_id} bundle ${a.bundle_path || "."}: ${w.code}: ${w.message}`,
        ),
      ),
    ],
  };
  if (!ok) {
    const diagnostics = [
      ...report.pipeline_errors.map((e) => `pipeline ${e.pipeline_id}: ${e.message}`),
      ...report.actions
        .filter((a) => a.status === "failed")
        .map(
          (a) =>
            `pipeline ${a.pipeline_id} destination ${a.destination_id} bundle ${a.bundle_path || "."}: ${a.error?.message ?? a.reason}`,
        ),
    ];
    const failed = report.actions.filter((a) => a.status === "failed").length;
    const message = report.interrupted
      ? `interrupted: ${report.actions.length - failed} destination action(s) finished, ${failed} failed; an interrupted write is recovered by the next run`
      : report.pipeline_errors.length > 0 && failed === 0
        ? (report.pipeline_errors[0]?.message ?? "run failed")
        : `${failed} destination action(s) and ${report.pipeline_errors.length} pipeline(s) failed`;
    const code = report.interrupted
      ? "aborted"
      : (report.pipeline_errors[0]?.code ?? "destination_failed");
    outcome.error = { code, message };
    outcome.diagnostics = diagnostics;
  }
  return outcome;
}

function actionLine(action: RunActionReport): string {
  return summaryLine(undefined, [
    ["pipeline", action.pipeline_id],
    ["destination", action.destination_id],
    ["bundle", action.bundle_path === "" ? "." : action.bundle_path],
    ["source", action.source_id],
    ["action", action.action],
    ["status", action.status],
    // A failed action lists what it planned, not what it wrote (the report does not say how
    // much that was): counting them as outputs would claim writes that never happened.
    [action.status === "failed" ? "planned" : "outputs", action.outputs.length],
    ["primary_url", action.primary_url],
    // A staged or promoted release says which one (and where a staged one can be looked at).
    ...(action.release_id === null ? [] : ([["release", action.release_id]] as const)),
    ...(action.preview_url === null ? [] : ([["preview_url", action.preview_url]] as const)),
  ]);
}
