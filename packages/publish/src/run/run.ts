import {
  type BundleIssue,
  type BundleSigner,
  BundleValidationError,
  describeNameCollision,
  discoverBundles,
  type FileCheckProgress,
  type Manifest,
  nameCollisionIssues,
  nameCollisions,
  readManifest,
  readSignedManifest,
  selectNewestBundle,
  validateBundle,
} from "@distributor/bundle";
import type { PublishPlan } from "@distributor/engine";
import {
  isFailAction,
  isWriteAction,
  type PlannedOutput,
  type PublishAction,
  publishTarget,
  RenderCache,
  selectOutputs,
} from "@distributor/engine";
import { ownerScope, type SourceSigner } from "@distributor/state";
import { displayPath, type StorageBackend, type StorageEntry } from "@distributor/storage";
import { findPipeline, sourceLocation } from "../backends/configured-location.js";
import { openBackend } from "../backends/registry.js";
import type { Config, DestinationConfig, PipelineConfig } from "../config/types.js";
import {
  type ActionError,
  actionError,
  errorCode,
  errorMessage,
  WorkflowError,
} from "../errors.js";
import { destinationSelection } from "../shared/selection.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import { signatureCode, signaturePolicy } from "../validate/signatures.js";

export type RunStatus = "published" | "planned" | "skipped" | "failed";

/** One output of an action; every field is present, `null` where it has no value (docs/cli.md). */
export interface RunOutputReport {
  path: string;
  kind: "source" | "generated";
  source_path: string;
  transform: string | null;
  url: string | null;
  sha256: string;
  size: number;
}

/** One destination bundle path of one pipeline: what was decided and what happened. */
export interface RunActionReport {
  pipeline_id: string;
  destination_id: string;
  bundle_path: string;
  source_id: string;
  /**
   * Who signed the source bundle's manifest (`source.signatures`): the allowed_signers principal
   * and the key's `SHA256:` fingerprint, as the state records them; null for an unsigned bundle or
   * a pipeline that does not check signatures.
   */
  signer: SourceSigner | null;
  /** Null when planning failed before an action was decided (e.g. an output path collision). */
  action: PublishAction | null;
  reason: string;
  status: RunStatus;
  primary_url: string | null;
  outputs: RunOutputReport[];
  /** Why the action failed: a documented code (docs/cli.md) and the message; null otherwise. */
  error: ActionError | null;
}

/** A pipeline that stopped before planning any destination (source unreadable or invalid). */
export interface RunPipelineError {
  pipeline_id: string;
  code: string;
  message: string;
}

/** A problem of a source bundle that does not stop it being published. */
export interface RunWarning {
  pipeline_id: string;
  /** The bundle's path below the source root (`.` for the root). */
  bundle_path: string;
  /** `name_collision`: names that are one name on case-insensitive or normalising stores. */
  code: string;
  /** Bundle-relative path the warning is about. */
  path: string;
  message: string;
}

export interface RunReport {
  dry_run: boolean;
  actions: RunActionReport[];
  pipeline_errors: RunPipelineError[];
  /** Warnings about source bundles, in pipeline and bundle order (see `validation.portable_names`). */
  warnings: RunWarning[];
  /**
   * True when the run was interrupted (its signal fired): `actions` holds what finished, and the
   * action in progress, failed; nothing after it was started.
   */
  interrupted: boolean;
}

/**
 * Progress of a run, for displays, in the order they happen for each pipeline: `pipeline_start`;
 * per destination bundle path a `plan`, then (for a write) `output_written` per output, and
 * `cleanup_start`/`cleanup_done` around the deletes that follow the state write, then
 * `destination_done`. Validation runs once per pipeline, before its first write (or planned
 * write): `validation_start` with the totals the manifests declare, `file_validated` per checked
 * file (in completion order) and `bundle_validated` per bundle. Events are small and emitted
 * unformatted and unthrottled; a display throttles what it draws.
 */
export type RunEvent =
  | { type: "pipeline_start"; pipeline_id: string }
  | {
      /** Full validation of the pipeline's bundles begins; totals are the manifests' own. */
      type: "validation_start";
      pipeline_id: string;
      bundles: number;
      files: number;
      bytes: number;
    }
  | {
      /** One listed file was checked (size and SHA-256), whatever the outcome. */
      type: "file_validated";
      pipeline_id: string;
      bundle_path: string;
      path: string;
      size: number;
    }
  | {
      type: "bundle_validated";
      pipeline_id: string;
      bundle_path: string;
      files: number;
      bytes: number;
    }
  | {
      /**
       * The decided action; for a write, `action.outputs` (with their sizes) is exactly what
       * follows as `output_written`. A write retried after a concurrent commit plans again.
       */
      type: "plan";
      action: RunActionReport;
    }
  | {
      type: "output_written";
      pipeline_id: string;
      destination_id: string;
      path: string;
      size: number;
    }
  | {
      /**
       * The state is written; the outputs it no longer records are being deleted: `deletes`
       * of them, or `null` for a forced replacement (everything else below the bundle path).
       */
      type: "cleanup_start";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      deletes: number | null;
    }
  | {
      /** The deletes of `cleanup_start` succeeded (a failure shows in `destination_done`). */
      type: "cleanup_done";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
    }
  | { type: "destination_done"; action: RunActionReport }
  | {
      /** A stale lease was broken and what its dead holder left behind was removed. */
      type: "recovered";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      deleted: string[];
      temp_files: string[];
    }
  | { type: "pipeline_error"; error: RunPipelineError };

export interface RunOptions extends WorkflowOptions<RunEvent> {
  config: Config;
  /** Pipelines to run, in config order; all pipelines when empty. */
  pipelineIds?: readonly string[];
  dryRun?: boolean;
  force?: boolean;
  /**
   * Also restore, where the state already records the current source (`skip_same`), the managed
   * outputs whose stored bytes are missing or changed (action `repair`). Hashes every recorded
   * output of those destinations.
   */
  repair?: boolean;
  /** Recorded as `distributor_version` in written state. */
  distributorVersion?: string;
  /** How long to wait for another run's live lease on a state file (default 0: fail at once). */
  lockTimeoutMs?: number;
  /** Lease lifetime and renewal, for tests that simulate crashed runs. */
  lease?: { ttlMs?: number; renew?: boolean };
  /**
   * `--allow-deletes N`: a publication may delete up to N managed outputs whatever a
   * destination's `max_deletes` says.
   */
  allowDeletes?: number;
  /**
   * Already-open source backends by pipeline id, read instead of the configured source and left
   * open for the caller to close. This is how `http_upload` pipelines run: the upload server
   * passes the staged bundle directory.
   */
  sources?: Readonly<Record<string, StorageBackend>>;
}

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
  return runWith(options, {});
}

/** Where a planned publication comes from and goes to (for saved plans). */
export interface PlannedTarget {
  pipeline: PipelineConfig;
  destination: DestinationConfig;
  /** Bundle path in the source backend. */
  sourceBundlePath: string;
}

/** What `run --plan-out` needs of a run besides its report: each final plan, as data. */
export interface RunHooks {
  onPublishPlan?: ((where: PlannedTarget, plan: PublishPlan) => void) | undefined;
}

/** `run` with hooks for the workflows built on it (saved plans). */
export async function runWith(options: RunOptions, hooks: RunHooks): Promise<RunReport> {
  const report: RunReport = {
    dry_run: options.dryRun ?? false,
    actions: [],
    pipeline_errors: [],
    warnings: [],
    interrupted: false,
  };
  const selected = selectPipelines(
    options.config,
    options.pipelineIds ?? [],
    options.sources,
    options.repair ?? false,
  );
  for (const pipeline of selected) {
    if (options.signal?.aborted) {
      report.interrupted = true;
      break;
    }
    options.onEvent?.({ type: "pipeline_start", pipeline_id: pipeline.id });
    const recorded = report.actions.length;
    try {
      await runPipeline(options, pipeline, report, hooks);
    } catch (error) {
      const interrupted = options.signal?.aborted ?? false;
      // Interrupted part-way through its destinations: the failed action says so already.
      if (interrupted && report.actions.length > recorded) {
        report.interrupted = true;
        break;
      }
      const failure = {
        pipeline_id: pipeline.id,
        code: interrupted ? "aborted" : errorCode(error),
        message: errorMessage(interrupted ? (options.signal?.reason ?? error) : error),
      };
      report.pipeline_errors.push(failure);
      options.onEvent?.({ type: "pipeline_error", error: failure });
      if (interrupted) {
        report.interrupted = true;
        break;
      }
    }
  }
  return report;
}

function selectPipelines(
  config: Config,
  ids: readonly string[],
  sources: RunOptions["sources"],
  repair: boolean,
): PipelineConfig[] {
  // An uploaded bundle is gone once its run ends: nothing here can republish its outputs.
  const restore = repair
    ? "; its source is gone once its run ends, so --repair cannot restore its outputs: upload the bundle again (distributor upload), and the server's run writes back what is missing"
    : "";
  if (ids.length === 0) {
    const runnable = config.pipelines.filter((p) => p.source.backend !== "http_upload");
    if (runnable.length === 0) {
      throw new WorkflowError(
        "nothing_to_run",
        `nothing ran: every pipeline of the configuration has an http_upload source, and those run only under distributor serve${restore}`,
      );
    }
    return runnable;
  }
  const wanted = ids.map((id) => findPipeline(config, id));
  for (const pipeline of wanted) {
    if (pipeline.source.backend === "http_upload" && sources?.[pipeline.id] === undefined) {
      throw new WorkflowError(
        "unsupported_source",
        `pipeline ${pipeline.id} has an http_upload source and runs only under serve${restore}`,
      );
    }
  }
  return config.pipelines.filter((pipeline) => wanted.includes(pipeline));
}

async function runPipeline(
  options: RunOptions,
  pipeline: PipelineConfig,
  report: RunReport,
  hooks: RunHooks,
) {
  const given = options.sources?.[pipeline.id];
  const source =
    given ??
    (await openBackend(options.backends, sourceLocation(pipeline), {
      role: "source",
      dryRun: options.dryRun ?? false,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    }));
  try {
    const bundles = await readPipelineManifests(options, pipeline, source);
    checkPortableNames(pipeline, bundles, report);
    // Full validation hashes every file, so it waits until some destination will write: a run
    // in which every destination skips reads manifests and state files only (docs/design/bundles.md). Once
    // needed, every bundle of the pipeline is validated, so one invalid bundle publishes nothing.
    let validation: Promise<void> | undefined;
    const validateAll = () => {
      validation ??= validatePipelineBundles(options, pipeline, source, bundles);
      return validation;
    };
    // Renderings are keyed by content, so every destination and bundle may share them.
    const cache = new RenderCache();
    for (const destination of pipeline.destinations) {
      const targets =
        destination.pathMapping.mode === "fixed"
          ? [selectNewestBundle(bundles)]
              .filter((b) => b !== undefined)
              .map((b) => ({ bundle: b, bundlePath: "" }))
          : bundles.map((bundle) => ({ bundle, bundlePath: bundle.path }));
      const context: DestinationContext = {
        options,
        pipeline,
        destination,
        source,
        cache,
        validateAll,
        onPublishPlan: hooks.onPublishPlan,
      };
      await runDestination(context, targets, report);
    }
  } finally {
    // A source that fails to close has already given what the run needed.
    if (given === undefined) await source.close().catch(() => undefined);
  }
}

/**
 * Names of the manifests, and of the outputs each destination would write from them (rendered
 * HTML included), that are one name on case-insensitive or normalising stores or with a file
 * distributor keeps: warnings in the report, or, under `validation.portable_names: true`, an
 * invalid bundle before anything is planned. Read from the manifests and the configuration
 * alone, so a run that only skips says so too.
 */
function checkPortableNames(pipeline: PipelineConfig, bundles: SourceBundle[], report: RunReport) {
  for (const bundle of bundles) {
    const issues = [
      ...nameCollisionIssues(bundle.manifest),
      ...outputNameIssues(pipeline, bundle.manifest),
    ];
    if (issues.length === 0) continue;
    if (pipeline.validation.portableNames) {
      throw bundleInvalid(
        new BundleValidationError(issues, { bundlePath: bundle.path }),
        bundle.path,
      );
    }
    for (const issue of issues) {
      report.warnings.push({
        pipeline_id: pipeline.id,
        bundle_path: displayPath(bundle.path),
        code: issue.code,
        path: issue.path,
        message: issue.message,
      });
    }
  }
}

/**
 * Collisions among the output paths the pipeline's destinations would write from `manifest` that
 * the manifest's own names do not already show: a rendered `Notes.md` as `Notes.html` against a
 * listed `notes.html`, say. One issue per collision, whatever the number of destinations. A
 * selection that fails (index mode meeting two Markdown files) is left to planning to report.
 */
function outputNameIssues(pipeline: PipelineConfig, manifest: Manifest): BundleIssue[] {
  const listed = new Set(
    nameCollisions(manifest.files.map((file) => file.path)).map((c) => c.paths.join("\0")),
  );
  const issues = new Map<string, BundleIssue>();
  for (const destination of pipeline.destinations) {
    const html = destination.publish.html && destination.transform.markdownToHtml.enabled;
    let outputs: ReturnType<typeof selectOutputs>;
    try {
      outputs = selectOutputs(manifest, {
        source: destination.publish.source,
        html: destination.publish.html,
        markdownMode: html ? destination.transform.markdownToHtml.mode : undefined,
      });
    } catch {
      continue;
    }
    const from = new Map(outputs.map((output) => [output.path, output.sourcePath]));
    for (const collision of nameCollisions(outputs.map((output) => output.path))) {
      const key = collision.paths.join("\0");
      if (listed.has(key) || issues.has(key)) continue;
      // Outputs rendered from colliding sources (`A.md`, `a.md`) repeat what the manifest says.
      const sources = collision.paths.map((path) => from.get(path));
      const folded = new Set(sources.map((path) => path?.normalize("NFC").toLowerCase()));
      if (collision.kind !== "reserved" && !sources.includes(undefined) && folded.size === 1) {
        continue;
      }
      issues.set(key, {
        code: "name_collision",
        path: collision.paths[0] ?? "",
        message: `destination ${destination.id} outputs ${describeNameCollision(collision)}`,
      });
    }
  }
  return [...issues.values()];
}

/**
 * Discovers the bundles of a pipeline's source and reads their manifests (no hashing yet). Under
 * `source.signatures` each manifest is read with its signature and refused unless it holds.
 */
async function readPipelineManifests(
  options: RunOptions,
  pipeline: PipelineConfig,
  source: StorageBackend,
): Promise<SourceBundle[]> {
  const discovered = await discoverBundles(source, "", { signal: options.signal });
  if (discovered.length === 0) {
    throw new WorkflowError("no_bundles", `no bundles found in source ${source.location}`);
  }
  const signatures = await signaturePolicy(pipeline, options);
  const reading = { signal: options.signal, maxFiles: pipeline.validation.maxFiles };
  const bundles: SourceBundle[] = [];
  for (const bundle of discovered) {
    try {
      const read: { manifest: Manifest; signer?: BundleSigner | undefined } =
        signatures === undefined
          ? { manifest: await readManifest(source, bundle.bundlePath, reading) }
          : await readSignedManifest(source, bundle.bundlePath, signatures, reading);
      const found: SourceBundle = {
        path: bundle.path,
        manifest: read.manifest,
        entries: bundle.entries,
      };
      if (read.signer !== undefined) found.signer = read.signer;
      bundles.push(found);
    } catch (error) {
      throw bundleInvalid(error, bundle.path);
    }
  }
  return bundles;
}

/** Files hashed at once while validating: one read chunk in memory each. */
const VALIDATION_CONCURRENCY = 8;

/** Validates every bundle in full (docs/design/bundles.md), each against the manifest planning used. */
async function validatePipelineBundles(
  options: RunOptions,
  pipeline: PipelineConfig,
  source: StorageBackend,
  bundles: SourceBundle[],
): Promise<void> {
  const onEvent = options.onEvent;
  if (onEvent !== undefined) {
    let files = 0;
    let bytes = 0;
    for (const bundle of bundles) {
      files += bundle.manifest.files.length;
      for (const file of bundle.manifest.files) bytes += file.size;
    }
    onEvent({
      type: "validation_start",
      pipeline_id: pipeline.id,
      bundles: bundles.length,
      files,
      bytes,
    });
  }
  for (const bundle of bundles) {
    let result: Awaited<ReturnType<typeof validateBundle>>;
    try {
      // The manifest planning used and the listing discovery made: read and walked once.
      result = await validateBundle(source, bundle.path, {
        unlistedFiles: pipeline.validation.unlistedFiles,
        maxFiles: pipeline.validation.maxFiles,
        maxTotalSize: pipeline.validation.maxTotalSize,
        portableNames: pipeline.validation.portableNames ? "refuse" : "warn",
        manifest: bundle.manifest,
        ...(bundle.entries === undefined ? {} : { listed: bundle.entries }),
        concurrency: VALIDATION_CONCURRENCY,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(onEvent === undefined
          ? {}
          : {
              onFile: (file: FileCheckProgress) =>
                onEvent({
                  type: "file_validated",
                  pipeline_id: pipeline.id,
                  bundle_path: displayPath(bundle.path),
                  path: file.path,
                  size: file.size,
                }),
            }),
      });
    } catch (error) {
      throw bundleInvalid(error, bundle.path);
    }
    // Nothing after validation reads the listing; 20 000 entries are megabytes of heap.
    bundle.entries = undefined;
    options.onEvent?.({
      type: "bundle_validated",
      pipeline_id: pipeline.id,
      bundle_path: displayPath(bundle.path),
      files: result.manifest.files.length,
      bytes: result.totalSize,
    });
  }
}

/** What the state records of a bundle's signer: the principal and the key's fingerprint. */
function recordedSigner(signer: BundleSigner | undefined): SourceSigner | undefined {
  return signer === undefined
    ? undefined
    : { principal: signer.principal, fingerprint: signer.fingerprint };
}

function bundleInvalid(error: unknown, path: string): unknown {
  if (!(error instanceof BundleValidationError)) return error;
  // The message already names the bundle; the report names the pipeline.
  const message = error.message.startsWith("bundle ")
    ? error.message
    : `bundle ${displayPath(path)}: ${error.message}`;
  // A refused signature keeps its own code: scripts tell an untrusted producer from a bad bundle.
  return new WorkflowError(signatureCode(error) ?? "bundle_invalid", message, { cause: error });
}

/** A discovered bundle and its manifest, read but not yet validated. */
export interface SourceBundle {
  path: string;
  manifest: Manifest;
  /**
   * What discovery listed below the bundle, validated instead of walking it again; dropped once
   * the bundle is validated.
   */
  entries: readonly StorageEntry[] | undefined;
  /** Who signed the manifest, when the source checks signatures and the bundle is signed. */
  signer?: BundleSigner;
}

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

async function runDestination(
  context: DestinationContext,
  targets: readonly Target[],
  report: RunReport,
) {
  const { options, pipeline, destination } = context;
  let backend: StorageBackend;
  try {
    backend = await openBackend(options.backends, destination.location, {
      role: "destination",
      dryRun: options.dryRun ?? false,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    for (const target of targets) {
      const action = baseAction(pipeline, destination, target.bundlePath, target.bundle);
      fail(action, error);
      report.actions.push(action);
      options.onEvent?.({ type: "destination_done", action });
      if (options.signal?.aborted) break;
    }
    options.signal?.throwIfAborted();
    return;
  }
  try {
    for (const target of targets) {
      const action = await runTarget(context, backend, target);
      report.actions.push(action);
      options.onEvent?.({ type: "destination_done", action });
      // Interrupted: the action in progress is reported failed, and nothing more starts.
      options.signal?.throwIfAborted();
    }
  } finally {
    // Fan-out: a destination that fails to close must not stop the pipeline's other destinations.
    await backend.close().catch(() => undefined);
  }
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
    outputs: [],
    error: null,
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
    await publishTarget({
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
          action.status = options.dryRun ? "planned" : "published";
        }
        options.onEvent?.({ type: "plan", action: { ...action } });
      },
    });
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

function outputReport(output: PlannedOutput): RunOutputReport {
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
