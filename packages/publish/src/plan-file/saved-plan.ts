import { createHash } from "node:crypto";
import type { PublishAction, PublishPlan } from "@distributor/engine";
import { encodeDocument, type OutputMetadata } from "@distributor/state";
import type { DestinationConfig, PipelineConfig } from "../config/types.js";
import { outputReport } from "../run/target.js";
import type { RunOutputReport } from "../run/types.js";

/**
 * Saved plans (`run --plan-out`, `apply`): the whole decision of a dry run, per destination bundle
 * path, as a versioned JSON document a reviewer reads and `applyPlan` carries out. The document
 * holds what the executor would do (writes with digests and sizes, fenced deletes, the next state
 * in full) and what the decision was made against (the state version, the source manifest, the
 * configuration of the pipeline and destination), so that applying it can prove nothing moved.
 */

/** The format of plan files this version writes and reads. */
export const PLAN_FORMAT_VERSION = 1;

/** One output write of a saved plan. */
export interface SavedPlanWrite {
  path: string;
  kind: "source" | "generated";
  source_path: string;
  transform: string | null;
  sha256: string;
  size: number;
  /** Replaces what is stored at the path (else a no-clobber create). */
  overwrite: boolean;
  /** The version an overwrite is conditional on; null for a create. */
  if_match: string | null;
  /**
   * Object metadata stored with it (the matching `metadata` rule's fields, snake_case); null when
   * none. With `content_encoding`, `sha256`/`size` are those of the compressed bytes.
   */
  metadata: Record<string, string> | null;
}

/** What one destination bundle path of one pipeline will become, and what it was planned from. */
export interface SavedPlanEntry {
  pipeline_id: string;
  destination_id: string;
  bundle_path: string;
  /** Digest of the pipeline's source and validation and of the destination's configuration. */
  config_digest: string;
  /**
   * One digest per configuration key that `config_digest` covers (`source`, `validation`,
   * `destination.<key>`), so that a refusal can name what changed. Absent in older plan files.
   */
  config_keys?: Record<string, string>;
  source: {
    /** Bundle path in the source. */
    bundle_path: string;
    manifest_id: string;
    manifest_created: string;
    manifest_digest: string;
  };
  action: PublishAction;
  reason: string;
  primary_url: string | null;
  /** Version token of `.distributor.json` planning read; null when there was none. */
  state_version: string | null;
  outputs: RunOutputReport[];
  writes: SavedPlanWrite[];
  deletes_first: string[];
  deletes: string[];
  delete_versions: Record<string, string>;
  clear_bundle_path: boolean;
  keep: string[];
  journal: { paths: string[]; directories: string[]; overwrites: string[] };
  /** The state written after the outputs (as `.distributor.json` holds it); null for no write. */
  next_state: unknown;
  /** SHA-256 of the exact bytes of `next_state` as the state file; null for no write. */
  next_state_sha256: string | null;
}

/** A plan file (`format_version` 1). */
export interface SavedPlan {
  format_version: typeof PLAN_FORMAT_VERSION;
  /** When the plan was made; the next states record this time. */
  planned_at: string;
  /** The distributor that made it; `apply` refuses a plan made by another version. */
  distributor_version: string | null;
  /** The configuration file it was planned from (`apply` reads it unless given another). */
  config_path: string;
  force: boolean;
  repair: boolean;
  destinations: SavedPlanEntry[];
}

const sha256 = (bytes: Uint8Array | string) =>
  `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** JSON with object keys sorted at every depth: one text for one value. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort())
      sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}

/**
 * The identity of a configured destination as a plan sees it: its own settings and its
 * pipeline's source and validation (secrets are references, never values). Any change to them
 * makes a saved plan for it refuse.
 */
export function configDigest(pipeline: PipelineConfig, destination: DestinationConfig): string {
  return sha256(
    canonicalJson({
      pipeline: { id: pipeline.id, source: pipeline.source, validation: pipeline.validation },
      destination,
    }),
  );
}

/**
 * The identity of a pipeline as a queued upload run sees it: its source, validation and every
 * destination (secrets are references, never values).
 */
export function pipelineConfigDigest(pipeline: PipelineConfig): string {
  return sha256(
    canonicalJson({
      id: pipeline.id,
      source: pipeline.source,
      validation: pipeline.validation,
      destinations: pipeline.destinations,
    }),
  );
}

/** The digests of each configuration key `configDigest` covers (see `SavedPlanEntry.config_keys`). */
export function configKeyDigests(
  pipeline: PipelineConfig,
  destination: DestinationConfig,
): Record<string, string> {
  const keys: Record<string, string> = {
    source: sha256(canonicalJson(pipeline.source)),
    validation: sha256(canonicalJson(pipeline.validation)),
  };
  for (const [key, value] of Object.entries(destination)) {
    if (key === "id" || value === undefined) continue;
    keys[`destination.${snakeCase(key)}`] = sha256(canonicalJson(value));
  }
  return keys;
}

const snakeCase = (key: string) => key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/**
 * The configuration keys of `entry` that are configured differently now (a key added or removed
 * counts), sorted; undefined when the plan file does not record them.
 */
export function changedConfigKeys(
  entry: SavedPlanEntry,
  pipeline: PipelineConfig,
  destination: DestinationConfig,
): string[] | undefined {
  const saved = entry.config_keys;
  if (saved === undefined) return undefined;
  const now = configKeyDigests(pipeline, destination);
  const keys = new Set([...Object.keys(saved), ...Object.keys(now)]);
  return [...keys].filter((key) => saved[key] !== now[key]).sort();
}

/** The saved form of a publish plan for one destination bundle path. */
export function savedPlanEntry(
  where: { pipeline: PipelineConfig; destination: DestinationConfig; sourceBundlePath: string },
  plan: PublishPlan,
): SavedPlanEntry {
  const nextState = plan.nextState === undefined ? undefined : encodeDocument(plan.nextState);
  return {
    pipeline_id: where.pipeline.id,
    destination_id: where.destination.id,
    bundle_path: plan.bundlePath,
    config_digest: configDigest(where.pipeline, where.destination),
    config_keys: configKeyDigests(where.pipeline, where.destination),
    source: {
      bundle_path: where.sourceBundlePath,
      manifest_id: plan.manifest.id,
      manifest_created: plan.manifest.created.toISOString(),
      manifest_digest: plan.manifest.digest,
    },
    action: plan.action,
    reason: plan.reason,
    primary_url: plan.primaryUrl ?? null,
    state_version: plan.stateVersion ?? null,
    outputs: plan.outputs.map(outputReport),
    writes: plan.writes.map((write) => ({
      path: write.output.path,
      kind: write.output.kind,
      source_path: write.output.sourcePath,
      transform: write.output.transform ?? null,
      sha256: write.output.sha256,
      size: write.output.size,
      overwrite: write.overwrite,
      if_match: write.ifMatch ?? null,
      metadata: savedMetadata(write.output.metadata),
    })),
    deletes_first: [...plan.deletesFirst],
    deletes: [...plan.deletes],
    delete_versions: { ...plan.deleteVersions },
    clear_bundle_path: plan.clearBundlePath,
    keep: [...plan.keep],
    journal: {
      paths: [...plan.journal.paths],
      directories: [...plan.journal.directories],
      overwrites: [...plan.journal.overwrites],
    },
    next_state: nextState === undefined ? null : JSON.parse(Buffer.from(nextState).toString()),
    next_state_sha256: nextState === undefined ? null : sha256(nextState),
  };
}

/** An output's metadata as a plan file lists it, keys as in the configuration. */
function savedMetadata(metadata: OutputMetadata | undefined): Record<string, string> | null {
  if (metadata === undefined) return null;
  const saved: Record<string, string> = {};
  if (metadata.cacheControl !== undefined) saved.cache_control = metadata.cacheControl;
  if (metadata.contentType !== undefined) saved.content_type = metadata.contentType;
  if (metadata.contentDisposition !== undefined) {
    saved.content_disposition = metadata.contentDisposition;
  }
  if (metadata.contentEncoding !== undefined) saved.content_encoding = metadata.contentEncoding;
  return Object.keys(saved).length === 0 ? null : saved;
}

/** Why a saved entry and a plan made now differ; undefined when they are the same decision. */
export interface PlanDifference {
  code: "plan_stale" | "source_changed";
  message: string;
}

/**
 * Compares the saved entry with the entry of a plan made now from the same source, destination
 * and time. Any difference at all refuses; the message names the first that explains it.
 */
export function planDifference(
  saved: SavedPlanEntry,
  now: SavedPlanEntry,
): PlanDifference | undefined {
  if (canonicalJson(saved) === canonicalJson(now)) return undefined;
  if (canonicalJson(saved.source) !== canonicalJson(now.source)) {
    return {
      code: "source_changed",
      message: `the source bundle changed since the plan (manifest ${saved.source.manifest_id} ${saved.source.manifest_digest} planned, ${now.source.manifest_id} ${now.source.manifest_digest} found)`,
    };
  }
  if (saved.state_version !== now.state_version) {
    return {
      code: "plan_stale",
      message: `the destination state changed since the plan (planned against ${versionText(saved.state_version)}, found ${versionText(now.state_version)})`,
    };
  }
  if (saved.action !== now.action) {
    return {
      code: "plan_stale",
      message: `the destination changed since the plan: it was planned as ${saved.action}, and would now be ${now.action} (${now.reason})`,
    };
  }
  const path = pathDifference(saved, now);
  if (path !== undefined) {
    return { code: "plan_stale", message: `the destination changed since the plan: ${path}` };
  }
  const field = (Object.keys(saved) as (keyof SavedPlanEntry)[]).find(
    (key) => canonicalJson(saved[key]) !== canonicalJson(now[key]),
  );
  return {
    code: "plan_stale",
    message: `the destination changed since the plan: planning now gives another ${field ?? "content"}`,
  };
}

/**
 * The first path (in path order) that the two entries treat differently, as
 * `data.csv: planned overwrite of version v1, now create`; undefined when every path is the same.
 */
function pathDifference(saved: SavedPlanEntry, now: SavedPlanEntry): string | undefined {
  const before = pathTreatments(saved);
  const after = pathTreatments(now);
  const paths = [...new Set([...before.keys(), ...after.keys()])].sort();
  for (const path of paths) {
    const planned = before.get(path) ?? "nothing";
    const found = after.get(path) ?? "nothing";
    if (planned !== found) return `${path}: planned ${planned}, now ${found}`;
  }
  return undefined;
}

/** What an entry does at each path it touches, in words. */
function pathTreatments(entry: SavedPlanEntry): Map<string, string> {
  const treatments = new Map<string, string>();
  const version = (path: string, at: string | null | undefined) =>
    at === null || at === undefined ? path : `${path} of version ${at}`;
  for (const write of entry.writes) {
    const what = write.overwrite ? version("overwrite", write.if_match) : "create";
    treatments.set(write.path, `${what} with ${write.sha256}`);
  }
  for (const path of entry.deletes_first) {
    treatments.set(path, version("delete before the writes", entry.delete_versions[path]));
  }
  for (const path of entry.deletes) {
    treatments.set(path, version("delete", entry.delete_versions[path]));
  }
  return treatments;
}

function versionText(version: string | null): string {
  return version === null ? "no state file" : `state version ${version}`;
}
