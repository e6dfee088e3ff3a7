import { checkGivenConfig } from "../config/given.js";
import { runWith } from "./pipelines.js";
import type { RunOptions, RunReport } from "./types.js";

/** True when every pipeline ran and no destination failed. */
export function runSucceeded(report: RunReport): boolean {
  return (
    !report.interrupted &&
    report.pipeline_errors.length === 0 &&
    report.actions.every((a) => a.status !== "failed")
  );
}

/**
 * Runs configured pipelines: for each, opens the source, discovers and validates every bundle,
 * then plans and (unless `dryRun`) executes each destination independently. A failing
 * destination never stops the others; the report says what happened everywhere.
 */
export async function run(options: RunOptions): Promise<RunReport> {
  checkGivenConfig(options, "run");
  return runWith(options, {});
}

/**
 * `run` that stages every release instead of making it live (`run --stage`): each write to a
 * `layout: releases` destination commits its release (status `staged`, with `release_id` and
 * `preview_url`) and leaves `current` and the live state as they were; `promote` makes a staged
 * release live. The events are `run`'s.
 */
export async function stage(options: Omit<RunOptions, "stage">): Promise<RunReport> {
  checkGivenConfig(options, "stage");
  return runWith({ ...options, stage: true }, {});
}
