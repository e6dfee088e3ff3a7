import {
  type BundleSigner,
  discoverBundles,
  type Manifest,
  readManifest,
  readSignedManifest,
  type SignaturePolicy,
  type SignedManifest,
  selectNewestBundle,
  validateBundle,
} from "@distributor/bundle";
import type { PublishPlan } from "@distributor/engine";
import { RenderCache } from "@distributor/engine";
import { isReleaseId } from "@distributor/state";
import { displayPath, type StorageBackend } from "@distributor/storage";
import { sourceLocation } from "../backends/configured-location.js";
import { openBackend } from "../backends/registry.js";
import type { Config, DestinationConfig, PipelineConfig } from "../config/types.js";
import { PlanFileError, PlanRefusedError, WorkflowError } from "../errors.js";
import { eachTarget } from "../run/destination-loop.js";
import { type DestinationContext, fail, runTarget } from "../run/target.js";
import type { RunActionReport, RunEvent, RunOptions, RunReport } from "../run/types.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import { signatureCode, signaturePolicy } from "../validate/signatures.js";
import { groups } from "./groups.js";
import {
  changedConfigKeys,
  configDigest,
  planDifference,
  type SavedPlan,
  type SavedPlanEntry,
  savedPlanEntry,
} from "./saved-plan.js";

export interface ApplyOptions extends WorkflowOptions<RunEvent> {
  /** The plan to carry out (`loadPlan`). */
  plan: SavedPlan;
  /** The configuration naming the plan's pipelines and destinations (`plan.config_path`'s). */
  config: Config;
  /** How the plan is named in messages (its file). */
  planName?: string;
  /**
   * Check the plan against sources and destinations and report what applying it would do,
   * writing nothing and taking no lease.
   */
  dryRun?: boolean;
  /** This distributor's version: a plan made by another one is refused. */
  distributorVersion?: string;
  /**
   * The oldest plan carried out, in milliseconds since it was made (default `DEFAULT_MAX_PLAN_AGE_MS`,
   * 24 hours): its next states record the plan's time as `published_at`, so an old plan would
   * publish a bundle that already looks old to prune and to the ranking of publications.
   */
  maxAgeMs?: number;
  lockTimeoutMs?: number;
  lease?: { ttlMs?: number; renew?: boolean };
}

/** How old a plan `applyPlan` carries out may be by default: 24 hours. */
export const DEFAULT_MAX_PLAN_AGE_MS = 24 * 60 * 60 * 1000;

/** Files hashed at once while validating a bundle before its first write. */
const VALIDATION_CONCURRENCY = 8;

/**
 * Carries out a saved plan exactly (`distributor apply`). Per destination bundle path, in the
 * plan's order: the configuration must still describe the planned pipeline and destination, the
 * source bundle must still be the planned one (manifest digest, then every file's digest before
 * the first write; for a `fixed` destination, still the newest of the source), and planning
 * again — at the plan's time, under the lease for a write — must give exactly the saved
 * decision (state version, stored versions, writes, deletes, next state).
 * Otherwise that destination is refused — none of the plan is carried out there (a lease a dead
 * run left there is still recovered first, as any run does) — and the others go on; when all
 * holds, the saved writes and deletes run under the commit protocol of docs/design/commit-protocol.md, so the bytes
 * and state are those a plain run at the plan's time would have left.
 */
export async function applyPlan(options: ApplyOptions): Promise<RunReport> {
  const { plan } = options;
  const name = options.planName ?? "plan";
  if ((plan.distributor_version ?? undefined) !== options.distributorVersion) {
    throw new PlanFileError(
      "plan_version_mismatch",
      `plan file ${name} was made by distributor ${plan.distributor_version ?? "(unknown)"}, and this is ${options.distributorVersion ?? "(unknown)"}: make the plan again with this version`,
    );
  }
  if (plan.force) {
    // A forced replacement clears whatever is below the bundle path when it runs, not what the
    // plan saw: files that appeared after the plan would go unreviewed. `run --plan-out` refuses
    // `--force`; this catches a plan file that says otherwise.
    throw new PlanFileError(
      "plan_invalid",
      `plan file ${name} is a forced plan; forced replacements cannot be saved and applied — run with --force instead`,
    );
  }
  const now = options.now?.() ?? new Date();
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_PLAN_AGE_MS;
  const ageMs = now.getTime() - new Date(plan.planned_at).getTime();
  if (ageMs > maxAgeMs) {
    throw new PlanFileError(
      "plan_expired",
      `plan file ${name} was made ${ageText(ageMs)} ago (planned_at ${plan.planned_at}), more than the maximum age ${ageText(maxAgeMs)}: its states would record that old time as published_at — make a new plan (or raise apply --max-age)`,
    );
  }
  const report: RunReport = {
    dry_run: options.dryRun ?? false,
    actions: [],
    pipeline_errors: [],
    // Name warnings were given when the plan was made, from the manifest apply checks is unchanged.
    warnings: [],
    interrupted: false,
  };
  const runOptions: RunOptions = {
    config: options.config,
    dryRun: options.dryRun ?? false,
    force: plan.force,
    repair: plan.repair,
    ...(options.distributorVersion === undefined
      ? {}
      : { distributorVersion: options.distributorVersion }),
    ...(options.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: options.lockTimeoutMs }),
    ...(options.lease === undefined ? {} : { lease: options.lease }),
    ...(options.backends === undefined ? {} : { backends: options.backends }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    ...(options.now === undefined ? {} : { now: options.now }),
  };
  const apply: Applying = {
    options: runOptions,
    report,
    name,
    planTime: new Date(plan.planned_at),
  };
  for (const [pipelineId, entries] of groups(plan.destinations, (e) => e.pipeline_id)) {
    if (options.signal?.aborted) {
      report.interrupted = true;
      break;
    }
    options.onEvent?.({ type: "pipeline_start", pipeline_id: pipelineId });
    await applyPipeline(apply, pipelineId, entries);
    if (options.signal?.aborted) {
      report.interrupted = true;
      break;
    }
  }
  return report;
}

/** A duration for messages: whole hours, minutes or seconds (rounded down). */
function ageText(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds >= 3600 && seconds % 3600 === 0) return `${seconds / 3600}h`;
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)}h${Math.floor((seconds % 3600) / 60)}m`;
  if (seconds >= 60) return `${Math.floor(seconds / 60)}m${seconds % 60}s`;
  return `${seconds}s`;
}

interface Applying {
  options: RunOptions;
  report: RunReport;
  name: string;
  planTime: Date;
}

/** An action of a saved entry that failed before (or instead of) planning again, recorded. */
function failedEntry(apply: Applying, entry: SavedPlanEntry, error: unknown): RunActionReport {
  const action = failedAction(entry, error);
  record(apply, action);
  return action;
}

/** The failed action of a saved entry. */
function failedAction(entry: SavedPlanEntry, error: unknown): RunActionReport {
  const action: RunActionReport = {
    pipeline_id: entry.pipeline_id,
    destination_id: entry.destination_id,
    bundle_path: displayPath(entry.bundle_path),
    source_id: entry.source.manifest_id,
    signer: null,
    action: entry.action,
    reason: "",
    status: "failed",
    primary_url: entry.primary_url,
    release_id: null,
    preview_url: null,
    outputs: entry.outputs,
    error: null,
    warnings: [],
  };
  fail(action, error);
  return action;
}

function record(apply: Applying, action: RunActionReport) {
  apply.report.actions.push(action);
  apply.options.onEvent?.({ type: "destination_done", action });
}

function refused(apply: Applying, code: string, detail: string): PlanRefusedError {
  return new PlanRefusedError(
    code,
    `${detail}; none of plan ${apply.name} was carried out there — make a new plan`,
  );
}

async function applyPipeline(apply: Applying, pipelineId: string, entries: SavedPlanEntry[]) {
  const { options } = apply;
  const pipeline = options.config.pipelines.find((p) => p.id === pipelineId);
  if (pipeline === undefined) {
    const error = refused(
      apply,
      "config_changed",
      `pipeline ${pipelineId} is not in the configuration ${options.config.sourceName}`,
    );
    for (const entry of entries) failedEntry(apply, entry, error);
    return;
  }
  let source: StorageBackend;
  try {
    source = await openBackend(options.backends, sourceLocation(pipeline), {
      role: "source",
      dryRun: options.dryRun ?? false,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    for (const entry of entries) failedEntry(apply, entry, error);
    return;
  }
  try {
    const bundles = new SourceBundles(apply, pipeline, source);
    const cache = new RenderCache();
    for (const [destinationId, group] of groups(entries, (e) => e.destination_id)) {
      await applyDestination(apply, { pipeline, source, bundles, cache }, destinationId, group);
      if (options.signal?.aborted) return;
    }
  } finally {
    await source.close().catch(() => undefined);
  }
}

/** The planned source bundles of one pipeline: each manifest read once, each bundle hashed once. */
class SourceBundles {
  private readonly manifests = new Map<string, Promise<SignedManifest>>();
  private policy: Promise<SignaturePolicy | undefined> | undefined;
  private readonly validations = new Map<string, Promise<void>>();
  private newest: Promise<string | undefined> | undefined;

  constructor(
    private readonly apply: Applying,
    private readonly pipeline: PipelineConfig,
    private readonly source: StorageBackend,
  ) {}

  /**
   * The manifest at `entry`'s source bundle path (and its signer, under `source.signatures`),
   * refused unless it is the planned one.
   */
  async manifest(entry: SavedPlanEntry): Promise<SignedManifest> {
    const path = entry.source.bundle_path;
    let read = this.manifests.get(path);
    if (read === undefined) {
      read = this.read(path);
      this.manifests.set(path, read);
    }
    let signed: SignedManifest;
    try {
      signed = await read;
    } catch (error) {
      // An unreadable allowed_signers file is the configuration's problem, not the bundle's.
      if (error instanceof WorkflowError) throw error;
      const code = signatureCode(error);
      if (code !== undefined) {
        throw refused(
          this.apply,
          code,
          `the planned source bundle ${path || "."} is refused: ${(error as Error).message}`,
        );
      }
      throw refused(
        this.apply,
        "source_changed",
        `the planned source bundle ${path || "."} cannot be read any more: ${(error as Error).message}`,
      );
    }
    const { manifest } = signed;
    const planned = entry.source;
    if (
      manifest.digest !== planned.manifest_digest ||
      manifest.id !== planned.manifest_id ||
      manifest.created.toISOString() !== planned.manifest_created
    ) {
      throw refused(
        this.apply,
        "source_changed",
        `the source bundle ${path || "."} changed since the plan (planned ${planned.manifest_id} ${planned.manifest_digest}, found ${manifest.id} ${manifest.digest})`,
      );
    }
    return signed;
  }

  /** The manifest at `path`, with its signature checked when the source requires signatures. */
  private async read(path: string): Promise<SignedManifest> {
    const { signal } = this.apply.options;
    this.policy ??= signaturePolicy(this.pipeline, this.apply.options);
    const policy = await this.policy;
    const reading = { signal, maxFiles: this.pipeline.validation.maxFiles };
    if (policy === undefined) {
      return { manifest: await readManifest(this.source, path, reading), signer: undefined };
    }
    return readSignedManifest(this.source, path, policy, reading);
  }

  /**
   * For a `fixed` destination, which publishes the newest bundle of the source: refused when the
   * planned bundle is no longer the one a run would select (a newer one was added, or it is gone).
   */
  async checkSelected(entry: SavedPlanEntry): Promise<void> {
    this.newest ??= this.selectNewest();
    let selected: string | undefined;
    try {
      selected = await this.newest;
    } catch (error) {
      throw refused(
        this.apply,
        "source_changed",
        `the source cannot be read to check the planned bundle is still its newest: ${(error as Error).message}`,
      );
    }
    const planned = entry.source.bundle_path;
    if (selected !== planned) {
      throw refused(
        this.apply,
        "source_changed",
        `the newest bundle of the source is now ${selected === undefined ? "none" : selected || "."}, not the planned ${planned || "."}`,
      );
    }
  }

  private async selectNewest(): Promise<string | undefined> {
    const { signal } = this.apply.options;
    const found = await discoverBundles(this.source, "", { signal });
    const bundles: { path: string; manifest: Manifest }[] = [];
    for (const bundle of found) {
      bundles.push({
        path: bundle.path,
        manifest: await readManifest(this.source, bundle.bundlePath, {
          signal,
          maxFiles: this.pipeline.validation.maxFiles,
        }),
      });
    }
    return selectNewestBundle(bundles)?.path;
  }

  /** Validates the bundle in full against its manifest; a file that changed refuses. */
  validate(path: string, manifest: Manifest): Promise<void> {
    let validation = this.validations.get(path);
    if (validation === undefined) {
      const rules = this.pipeline.validation;
      validation = validateBundle(this.source, path, {
        unlistedFiles: rules.unlistedFiles,
        maxFiles: rules.maxFiles,
        maxTotalSize: rules.maxTotalSize,
        manifest,
        concurrency: VALIDATION_CONCURRENCY,
        ...(this.apply.options.signal ? { signal: this.apply.options.signal } : {}),
      }).then(
        () => undefined,
        (error: unknown) => {
          throw refused(
            this.apply,
            "source_changed",
            `the source bundle ${path || "."} no longer matches its planned manifest: ${(error as Error).message}`,
          );
        },
      );
      this.validations.set(path, validation);
    }
    return validation;
  }
}

interface PipelineApplying {
  pipeline: PipelineConfig;
  source: StorageBackend;
  bundles: SourceBundles;
  cache: RenderCache;
}

async function applyDestination(
  apply: Applying,
  shared: PipelineApplying,
  destinationId: string,
  entries: SavedPlanEntry[],
) {
  const { options } = apply;
  const { pipeline } = shared;
  const destination = pipeline.destinations.find((d) => d.id === destinationId);
  const problem =
    destination === undefined
      ? `pipeline ${pipeline.id} has no destination ${destinationId} in the configuration ${options.config.sourceName}`
      : undefined;
  const current = destination === undefined ? undefined : configDigest(pipeline, destination);
  const ready: SavedPlanEntry[] = [];
  for (const entry of entries) {
    if (problem !== undefined) {
      failedEntry(apply, entry, refused(apply, "config_changed", problem));
    } else if (entry.config_digest !== current) {
      const keys = changedConfigKeys(entry, pipeline, destination as DestinationConfig);
      const which = keys === undefined ? "" : ` (${keys.join(", ")})`;
      const detail = `the configuration of pipeline ${pipeline.id} destination ${destinationId} in ${options.config.sourceName} changed since the plan${which}`;
      failedEntry(apply, entry, refused(apply, "config_changed", detail));
    } else {
      ready.push(entry);
    }
  }
  if (destination === undefined || ready.length === 0) return;
  await eachTarget(apply.options, destination, ready, apply.report.actions, {
    run: (backend, entry) => applyEntry(apply, shared, destination, backend, entry),
    failed: (entry, error) => failedAction(entry, error),
  });
}

/** The release a saved plan's next state records (`layout: releases`): the apply builds that one. */
function savedReleaseId(entry: SavedPlanEntry): string | undefined {
  const next = entry.next_state as { release?: { id?: unknown } } | null;
  const id = next?.release?.id;
  return typeof id === "string" && isReleaseId(id) ? id : undefined;
}

async function applyEntry(
  apply: Applying,
  shared: PipelineApplying,
  destination: DestinationConfig,
  backend: StorageBackend,
  entry: SavedPlanEntry,
): Promise<RunActionReport | undefined> {
  const { pipeline, bundles } = shared;
  let manifest: Manifest;
  let signer: BundleSigner | undefined;
  try {
    ({ manifest, signer } = await bundles.manifest(entry));
    if (destination.pathMapping.mode === "fixed") await bundles.checkSelected(entry);
  } catch (error) {
    failedEntry(apply, entry, error);
    return undefined;
  }
  const sourceBundlePath = entry.source.bundle_path;
  const context: DestinationContext = {
    options: apply.options,
    pipeline,
    destination,
    source: shared.source,
    cache: shared.cache,
    validateAll: () => bundles.validate(sourceBundlePath, manifest),
    validationFailsAction: true,
    planTime: apply.planTime,
    releaseId: savedReleaseId(entry),
    approve: (plan: PublishPlan) => {
      const now = savedPlanEntry({ pipeline, destination, sourceBundlePath }, plan);
      const difference = planDifference(entry, now);
      if (difference !== undefined) throw refused(apply, difference.code, difference.message);
    },
  };
  const action = await runTarget(context, backend, {
    bundle: {
      path: sourceBundlePath,
      manifest,
      entries: undefined,
      ...(signer === undefined ? {} : { signer }),
    },
    bundlePath: entry.bundle_path,
  });
  if (action.action === null) {
    // Refused (or failed) before a plan was accepted: report the planned action.
    action.action = entry.action;
    action.outputs = entry.outputs;
    action.primary_url = entry.primary_url;
  }
  return action;
}
