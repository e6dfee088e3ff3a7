// One destination of a pipeline: each target bundle planned and executed (`applyPlan` carries out
// saved plans through `runTarget`).
import type { BundleSigner, Manifest } from "@distributor/bundle";
import type { PublishPlan } from "@distributor/engine";
import {
  isFailAction,
  isWriteAction,
  type PlannedOutput,
  type PublishTargetOptions,
  publishRelease,
  publishTarget,
  type RenderCache,
} from "@distributor/engine";
import { ownerScope } from "@distributor/state";
import { displayPath, type StorageBackend } from "@distributor/storage";
import type { DestinationConfig, PipelineConfig } from "../config/types.js";
import { actionError, errorMessage, WorkflowError } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { previewUrlOf } from "../shared/preview-url.js";
import { destinationSelection } from "../shared/selection.js";
import { eachTarget } from "./destination-loop.js";
import { recordedSigner, type SourceBundle } from "./source-bundles.js";
import type {
  RunActionReport,
  RunActionWarning,
  RunHooks,
  RunOptions,
  RunOutputReport,
  RunReport,
} from "./types.js";

/** What every destination of one pipeline shares while it runs. */
export interface DestinationContext {
  options: RunOptions;
  pipeline: PipelineConfig;
  destination: DestinationConfig;
  source: StorageBackend;
  cache: RenderCache;
  /**
   * Validates the source before the first write (`run`: every bundle of the pipeline, once); a
   * failure stops the whole pipeline unless `validationFailsAction` is set.
   */
  validateAll: () => Promise<void>;
  /** A failed validation fails the action alone (applying a saved plan) instead of the pipeline. */
  validationFailsAction?: boolean | undefined;
  /** Receives every final plan (saved plans). */
  onPublishPlan?: RunHooks["onPublishPlan"];
  /** Checks every plan before it is reported or carried out; throws to refuse it (apply). */
  approve?: ((plan: PublishPlan) => void) | undefined;
  /** The time plans record in their next state, instead of the clock's (apply). */
  planTime?: Date | undefined;
  /** The release a publication under `layout: releases` builds, instead of a new id (apply). */
  releaseId?: string | undefined;
}

/** Marks a validation failure met inside a destination, which stops the whole pipeline. */
class PipelineStop extends Error {
  constructor(readonly reason: unknown) {
    super("pipeline stopped");
  }
}

export interface Target {
  bundle: SourceBundle;
  /** Destination bundle path. */
  bundlePath: string;
}

export async function runDestination(
  context: DestinationContext,
  targets: readonly Target[],
  report: RunReport,
) {
  const { options, pipeline, destination } = context;
  await eachTarget(options, destination, targets, report.actions, {
    run: (backend, target) => runTarget(context, backend, target),
    failed(target, error) {
      const action = baseAction(pipeline, destination, target.bundlePath, target.bundle);
      fail(action, error);
      return action;
    },
  });
  options.signal?.throwIfAborted();
}

function baseAction(
  pipeline: PipelineConfig,
  destination: DestinationConfig,
  bundlePath: string,
  bundle: { manifest: Manifest; signer?: BundleSigner | undefined },
): RunActionReport {
  return {
    pipeline_id: pipeline.id,
    destination_id: destination.id,
    bundle_path: displayPath(bundlePath),
    source_id: bundle.manifest.id,
    signer: recordedSigner(bundle.signer) ?? null,
    action: null,
    reason: "",
    status: "failed",
    primary_url: null,
    release_id: null,
    preview_url: null,
    outputs: [],
    error: null,
    warnings: [],
  };
}

export function fail(action: RunActionReport, error: unknown) {
  action.status = "failed";
  action.error = actionError(error);
  if (action.reason === "") action.reason = action.error.message;
}

export async function runTarget(
  context: DestinationContext,
  backend: StorageBackend,
  target: Target,
): Promise<RunActionReport> {
  const { options, pipeline, destination, source, cache } = context;
  const { manifest } = target.bundle;
  const action = baseAction(pipeline, destination, target.bundlePath, target.bundle);
  const signal = options.signal;
  try {
    const selection = destinationSelection(destination, manifest, target.bundlePath);
    const layout = destination.layout;
    const stage =
      options.stage === true || (layout.mode === "releases" && layout.promote === "manual");
    if (stage && layout.mode !== "releases") {
      throw new WorkflowError(
        "unsupported_layout",
        `destination ${destination.id} publishes in place (no layout: releases): a release can be staged only under layout: releases; nothing was published`,
      );
    }
    let staged: string | undefined;
    let promoted: string | undefined;
    const publish = (publishOptions: PublishTargetOptions) =>
      layout.mode === "releases"
        ? publishRelease(publishOptions, {
            keep: layout.keep,
            keepStaged: layout.keepStaged,
            stage,
            onStaged: (id) => {
              staged = id;
            },
            onPromoted: (id) => {
              promoted = id;
            },
            onPromotionRefused: (id, error) =>
              action.warnings.push({
                code: "promotion_refused",
                message: `release ${id} staged this source, but it could not be made live (${error.code}: ${error.message}); the source was published again as a new release`,
                paths:
                  error.check === undefined ? [] : [...error.check.changed, ...error.check.missing],
              }),
            onStagedOutdated: (id) =>
              action.warnings.push({
                code: "staged_outdated",
                message: `release ${id} staged this source under another configuration (a run would not publish it as it is), so it was not ${stage ? "reused" : "made live"}; the source was ${stage ? "staged" : "published"} again as a new release`,
                paths: [],
              }),
            id: context.releaseId,
            // A saved plan is carried out exactly, and saving one promotes nothing.
            promoteStaged: context.approve === undefined && context.onPublishPlan === undefined,
            onRewritten: (paths) => action.warnings.push(rewrittenWarning(paths)),
            onRecordedMissing: (recorded, next) =>
              action.warnings.push({
                code: "release_missing",
                message: `release ${recorded}, which the state recorded, had lost its directory; its files were published again from the source as release ${next}`,
                paths: [],
              }),
            onRetentionFailed: (error) =>
              action.warnings.push({
                code: "retention_failed",
                message: `${stage ? "the new release is staged (current was not switched)" : "the new release is live"}, but removing releases beyond releases.keep (${layout.keep})${stage && layout.keepStaged !== undefined ? ` and releases.keep_staged (${layout.keepStaged})` : ""} failed: ${errorMessage(error)}; the next run tries again`,
                paths: [],
              }),
          })
        : publishTarget(publishOptions);
    await publish({
      plan: {
        source,
        sourceBundlePath: target.bundle.path,
        destination: backend,
        target: {
          owner: ownerScope(pipeline.id, destination.id),
          manifest,
          signer: recordedSigner(target.bundle.signer),
          bundlePath: target.bundlePath,
          stateMode: destination.state.mode,
          reconciliation: destination.reconciliation.mode,
          pathMapping: destination.pathMapping.mode,
          transfer: destination.transfer,
          force: options.force ?? false,
          repair: options.repair ?? false,
          maxDeletes: destination.maxDeletes,
          allowDeletes: options.allowDeletes,
        },
        selection,
        selectFor: (recorded) => destinationSelection(destination, recorded, target.bundlePath),
        limits: destinationLimits(pipeline.id, destination),
        links: destination.links,
        distributorVersion: options.distributorVersion,
        cache,
        signal,
      },
      now: () => context.planTime ?? options.now?.() ?? new Date(),
      dryRun: options.dryRun ?? false,
      approve: context.approve,
      lease: {
        lockTimeoutMs: options.lockTimeoutMs,
        ttlMs: options.lease?.ttlMs,
        renew: options.lease?.renew,
        now: options.now,
      },
      execute: {
        signal,
        ...(destination.transfers === undefined ? {} : { concurrency: destination.transfers }),
        onOutputWritten: (output: PlannedOutput) =>
          options.onEvent?.({
            type: "output_written",
            pipeline_id: pipeline.id,
            destination_id: destination.id,
            path: output.path,
            size: output.size,
          }),
        onCleanupStart: (deletes: number | null) =>
          options.onEvent?.({
            type: "cleanup_start",
            pipeline_id: pipeline.id,
            destination_id: destination.id,
            bundle_path: displayPath(target.bundlePath),
            deletes,
          }),
        onCleanupDone: () =>
          options.onEvent?.({
            type: "cleanup_done",
            pipeline_id: pipeline.id,
            destination_id: destination.id,
            bundle_path: displayPath(target.bundlePath),
          }),
      },
      beforeWrite: async () => {
        try {
          await context.validateAll();
        } catch (error) {
          throw context.validationFailsAction ? error : new PipelineStop(error);
        }
      },
      onRecovered: (recovery) =>
        options.onEvent?.({
          type: "recovered",
          pipeline_id: pipeline.id,
          destination_id: destination.id,
          bundle_path: displayPath(target.bundlePath),
          deleted: recovery.deleted,
          temp_files: recovery.tempFiles,
        }),
      onPlan: (plan) => {
        context.onPublishPlan?.(
          { pipeline, destination, sourceBundlePath: target.bundle.path },
          plan,
        );
        action.action = plan.action;
        action.reason = plan.reason;
        action.outputs = plan.outputs.map(outputReport);
        action.primary_url = plan.primaryUrl ?? null;
        action.error = null;
        if (isFailAction(plan.action)) {
          action.status = "failed";
          action.error = {
            code: plan.code ?? (plan.action === "fail_unmanaged" ? "unmanaged" : "conflict"),
            message: `${plan.action}: ${plan.reason}`,
          };
        } else if (!isWriteAction(plan.action)) {
          action.status = "skipped";
        } else {
          // Published only once it is committed (below): the plan event comes before any write.
          action.status = options.dryRun ? "planned" : "publishing";
        }
        options.onEvent?.({ type: "plan", action: { ...action } });
      },
    });
    if (action.status === "publishing") action.status = "published";
    if (staged !== undefined && layout.mode === "releases") {
      action.status = "staged";
      action.release_id = staged;
      action.preview_url = previewUrlOf(layout.previewUrl, staged);
    } else if (promoted !== undefined && (action.status === "skipped" || options.dryRun)) {
      action.status = "promoted";
      action.release_id = promoted;
      if (options.dryRun) {
        // What the run would do: make the staged release live and then skip, writing nothing.
        action.action = "skip_same";
        action.reason = `release ${promoted} staged this source: the run would make it live, writing nothing`;
      }
    }
  } catch (error) {
    if (signal?.aborted) {
      // Reported, not thrown: an interrupted run prints its whole result (docs/design/commit-protocol.md, docs/cli.md).
      fail(action, error);
      const reason = errorMessage(signal.reason);
      const message = action.error?.message ?? "";
      action.error = {
        code: "aborted",
        message: message.includes(reason) ? message : `${reason}: ${message}`,
      };
      return action;
    }
    if (error instanceof PipelineStop) throw error.reason;
    fail(action, error);
  }
  return action;
}

function rewrittenWarning(paths: readonly string[]): RunActionWarning {
  const shown = paths.slice(0, 5).join(", ");
  const more = paths.length > 5 ? ` (and ${paths.length - 5} more)` : "";
  return {
    code: "release_files_rewritten",
    message: `${paths.length} file(s) of the previous release changed after it was committed (edited in place): ${shown}${more}; the new release holds them written again from the source; the earlier release keeps the edited bytes (audit reports it, rollback refuses it unless --force) until retention removes it`,
    paths: [...paths],
  };
}

/** An output as reports and saved plans give it. */
export function outputReport(output: PlannedOutput): RunOutputReport {
  return {
    path: output.path,
    kind: output.kind,
    source_path: output.sourcePath,
    transform: output.transform ?? null,
    url: output.url ?? null,
    sha256: output.sha256,
    size: output.size,
  };
}
