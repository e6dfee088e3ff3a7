import type { PublishPlan } from "../publish/plan.js";
import { type RunOptions, type RunReport, runWith } from "./run.js";
import { PLAN_FORMAT_VERSION, type SavedPlan, savedPlanEntry } from "./saved-plan.js";

/** `run --plan-out`: a dry run whose plans are kept. */
export type PlanRunOptions = Omit<RunOptions, "dryRun" | "lease" | "lockTimeoutMs" | "sources">;

export interface PlanRunResult {
  /** The dry run's report, as `run --dry-run` gives it. */
  report: RunReport;
  /**
   * The complete plan, or null when some destination could not be planned (a pipeline error, a
   * planning failure, an interrupt): an incomplete plan is never handed out to be applied.
   */
  plan: SavedPlan | null;
}

/**
 * Plans every destination of the selected pipelines as `run --dry-run` does — reading sources and
 * destinations, validating the bundles that would be written, taking no lease and writing
 * nothing — and returns the whole decision as a saved plan (see `savePlan`, `applyPlan`). Every
 * plan of one call is made at one time, which the next states record.
 */
export async function planRun(options: PlanRunOptions): Promise<PlanRunResult> {
  const plannedAt = options.now?.() ?? new Date();
  const plans = new Map<string, ReturnType<typeof savedPlanEntry>>();
  const key = (pipeline: string, destination: string, bundlePath: string) =>
    JSON.stringify([pipeline, destination, bundlePath]);
  const report = await runWith(
    { ...options, dryRun: true, now: () => plannedAt },
    {
      onPublishPlan: (where, plan: PublishPlan) => {
        plans.set(
          key(where.pipeline.id, where.destination.id, plan.bundlePath),
          savedPlanEntry(where, plan),
        );
      },
    },
  );
  const entries = report.actions.map((action) =>
    action.action === null
      ? undefined
      : plans.get(key(action.pipeline_id, action.destination_id, action.bundle_path)),
  );
  const complete =
    !report.interrupted &&
    report.pipeline_errors.length === 0 &&
    entries.every((entry) => entry !== undefined);
  if (!complete) return { report, plan: null };
  return {
    report,
    plan: {
      format_version: PLAN_FORMAT_VERSION,
      planned_at: plannedAt.toISOString(),
      distributor_version: options.distributorVersion ?? null,
      config_path: options.config.sourceName,
      force: options.force ?? false,
      repair: options.repair ?? false,
      destinations: entries.filter((entry) => entry !== undefined),
    },
  };
}
