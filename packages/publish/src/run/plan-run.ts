import type { PublishPlan } from "@distributor/engine";
import { displayPath, statePath } from "@distributor/storage";
import { checkGivenConfig } from "../config/given.js";
import type { DestinationConfig, StorageLocation } from "../config/types.js";
import { PlanFileError } from "../errors.js";
import {
  PLAN_FORMAT_VERSION,
  type SavedPlan,
  type SavedPlanEntry,
  savedPlanEntry,
} from "../plan-file/saved-plan.js";
import { runWith } from "./pipelines.js";
import type { RunOptions, RunReport } from "./types.js";

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
 *
 * Refused (`PlanFileError`): `force` (a forced replacement clears whatever is below the bundle
 * path when it runs, which no plan can show), and a plan where a write comes before another
 * entry of the same shared-root state file (that write changes the state every later entry was
 * planned against, so applying it would always refuse them: plan one pipeline at a time).
 */
export async function planRun(options: PlanRunOptions): Promise<PlanRunResult> {
  checkGivenConfig(options, "planRun");
  if (options.force) {
    throw new PlanFileError(
      "plan_force_unsupported",
      "a forced run cannot be saved as a plan: a forced replacement deletes whatever is below the bundle path when it is applied, not what the plan listed — run with --force directly",
    );
  }
  const plannedAt = options.now?.() ?? new Date();
  const plans = new Map<string, ReturnType<typeof savedPlanEntry>>();
  const destinations = new Map<string, DestinationConfig>();
  const key = (pipeline: string, destination: string, bundlePath: string) =>
    JSON.stringify([pipeline, destination, bundlePath]);
  const report = await runWith(
    { ...options, dryRun: true, now: () => plannedAt },
    {
      onPublishPlan: (where, plan: PublishPlan) => {
        destinations.set(
          JSON.stringify([where.pipeline.id, where.destination.id]),
          where.destination,
        );
        plans.set(
          key(where.pipeline.id, where.destination.id, displayPath(plan.bundlePath)),
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
  const saved = entries.filter((entry) => entry !== undefined);
  checkSharedStates(saved, (entry) =>
    destinations.get(JSON.stringify([entry.pipeline_id, entry.destination_id])),
  );
  return {
    report,
    plan: {
      format_version: PLAN_FORMAT_VERSION,
      planned_at: plannedAt.toISOString(),
      distributor_version: options.distributorVersion ?? null,
      config_path: options.config.sourceName,
      force: options.force ?? false,
      repair: options.repair ?? false,
      destinations: saved,
    },
  };
}

/**
 * Refuses a plan where an entry follows a write to the same state file: each entry is planned
 * against the state version planning read, which that write replaces.
 */
function checkSharedStates(
  entries: readonly SavedPlanEntry[],
  destinationOf: (entry: SavedPlanEntry) => DestinationConfig | undefined,
): void {
  const writers = new Map<string, SavedPlanEntry>();
  for (const entry of entries) {
    const destination = destinationOf(entry);
    if (destination === undefined) continue;
    const state = `${locationKey(destination.location)} ${statePath(entry.bundle_path)}`;
    const writer = writers.get(state);
    if (writer !== undefined) {
      throw new PlanFileError(
        "plan_shared_state",
        `pipeline ${writer.pipeline_id} destination ${writer.destination_id} and pipeline ${entry.pipeline_id} destination ${entry.destination_id} share the state file of bundle path ${displayPath(entry.bundle_path)}, and the first writes it: applying that write would make the plan for the second stale, so no plan is saved — plan one pipeline at a time (--pipeline ${writer.pipeline_id}, apply, then --pipeline ${entry.pipeline_id})`,
      );
    }
    if (entry.next_state !== null) writers.set(state, entry);
  }
}

/** One text per place a state file can live: backend, server or bucket, and root. */
function locationKey(location: StorageLocation): string {
  switch (location.backend) {
    case "local":
      return `local ${location.path}`;
    case "ssh":
      return `ssh ${location.host.toLowerCase()}:${location.port} ${location.path}`;
    case "s3":
      return `s3 ${location.endpoint ?? ""} ${location.bucket} ${location.prefix}`;
  }
}
