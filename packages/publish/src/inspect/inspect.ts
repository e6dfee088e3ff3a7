import { stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import {
  BundleValidationError,
  DEFAULT_DISCOVERY_LIMIT,
  formatTimestamp,
  MANIFEST_FILE_NAME,
  type Manifest,
  readManifest,
  validateBundle,
} from "@distributor/bundle";
import {
  type DestinationLimits,
  listReleases,
  MAX_READABLE_STATE_BYTES,
  walkWithin,
} from "@distributor/engine";
import { formatStateTimestamp } from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import {
  openConfiguredDestination,
  openConfiguredSource,
} from "../backends/configured-location.js";
import { openLocalDirectory } from "../backends/local-directory.js";
import { withBackend } from "../backends/registry.js";
import type { Config } from "../config/types.js";
import { WorkflowError } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { type LeaseWithoutState, leasesWithoutState } from "../shared/leases-without-state.js";
import { previewUrlOf } from "../shared/preview-url.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import {
  checkBundles,
  type IssueReport,
  isFile,
  issueReports,
  type ValidationRules,
  validationRules,
} from "../validate/bundle-checks.js";
import type { ValidateEvent } from "../validate/validate.js";
import {
  inspectStateFile,
  isStateFile,
  type ReleaseListing,
  type StateReport,
} from "./inspect-state.js";

/**
 * How one listed file compared with the manifest: `ok`, the bundle issue code that concerns it, or
 * `unchecked` when validation stopped before reaching it (a manifest over the limits, a symlink).
 */
export type InspectedFileStatus =
  | "ok"
  | "unchecked"
  | "missing_file"
  | "not_regular_file"
  | "unsupported_entry"
  | "size_mismatch"
  | "sha256_mismatch";

export interface InspectedFile {
  path: string;
  /** As listed in the manifest. */
  sha256: string;
  size: number;
  status: InspectedFileStatus;
  /** What was found instead, for `sha256_mismatch` and `size_mismatch`. */
  actual_sha256?: string;
  actual_size?: number | string;
}

/** A bundle's manifest, and how its files compare with it. */
export interface BundleInspection {
  /** Path of the bundle relative to the inspected root; `.` for the root itself. */
  path: string;
  /** True when the bundle passes validation. */
  ok: boolean;
  /** Null when the manifest is missing or invalid. */
  manifest: { schema_version: 1; id: string; created: string; digest: string } | null;
  files: InspectedFile[];
  total_size: number | null;
  /** Files present but not listed in the manifest. */
  unlisted_files: string[];
  issues: IssueReport[];
}

/** Result of inspecting source bundles. */
export interface BundleTreeInspection {
  kind: "bundles";
  ok: boolean;
  location: string;
  pipeline_id?: string;
  /** Problems of the tree itself: nested bundles, no bundle found. */
  issues: IssueReport[];
  bundles: BundleInspection[];
}

/** Result of inspecting destination state. */
export interface StateTreeInspection {
  kind: "state";
  ok: true;
  location: string;
  pipeline_id?: string;
  destination_id?: string;
  /** Every `.distributor.json` found, in path order; empty for a destination never published to. */
  states: StateReport[];
  /**
   * Leases with no state file beside them, in path order: a first publication under way, or one
   * that was interrupted (the next run recovers what it wrote).
   */
  leases_without_state: LeaseWithoutState[];
  /**
   * Under `layout: releases`: the releases of the destination root while it has no state yet —
   * every publication there was staged, none promoted. Absent otherwise.
   */
  staged_without_state?: ReleaseListing[];
}

export type InspectReport = BundleTreeInspection | StateTreeInspection;

/**
 * A path inspected without a configuration has no destination settings: any state that can be
 * read back is shown, within the listing bound of source discovery.
 */
const UNCONFIGURED_LIMITS: DestinationLimits = {
  stateBytes: { value: MAX_READABLE_STATE_BYTES },
  entries: { value: DEFAULT_DISCOVERY_LIMIT },
};

export interface InspectPathOptions extends WorkflowOptions<ValidateEvent> {
  /** A bundle directory, a directory of bundles, a destination directory, or one of their files. */
  path: string;
}

export interface InspectConfiguredSourceOptions extends WorkflowOptions<ValidateEvent> {
  config: Config;
  pipelineId: string;
  /** Only the bundle at this path relative to the source root; default every bundle. */
  bundlePath?: string;
}

export interface InspectConfiguredDestinationOptions extends WorkflowOptions {
  config: Config;
  pipelineId: string;
  destinationId: string;
}

/**
 * Inspects a local path, deciding by what it holds: bundles when any `manifest.json` is found (or
 * the path is one), else destination state when any `.distributor.json` is (or the path is one).
 */
export async function inspectPath(options: InspectPathOptions): Promise<InspectReport> {
  const info = await stat(options.path).catch(() => undefined);
  if (info?.isFile() === true) {
    const name = basename(options.path);
    const directory = dirname(options.path);
    if (name === MANIFEST_FILE_NAME) return inspectBundlePath({ ...options, path: directory }, "");
    if (name === STATE_FILE_NAME) {
      const backend = await openLocalDirectory(directory);
      return withBackend(backend, async () => ({
        kind: "state",
        ok: true,
        location: backend.location,
        states: [
          await inspectStateFile(
            backend,
            STATE_FILE_NAME,
            options.signal,
            UNCONFIGURED_LIMITS.stateBytes,
          ),
        ],
        leases_without_state: [],
      }));
    }
    throw new WorkflowError(
      "not_a_directory",
      `${options.path} is not a directory, ${MANIFEST_FILE_NAME} or ${STATE_FILE_NAME}`,
    );
  }

  const backend = await openLocalDirectory(options.path);
  const found = await withBackend(backend, async () => {
    if (await isFile(backend, MANIFEST_FILE_NAME, options.signal))
      return { bundles: true, states: false };
    if (await isFile(backend, STATE_FILE_NAME, options.signal))
      return { bundles: false, states: true };
    const entries = await backend.walk("", {
      recursive: true,
      limit: DEFAULT_DISCOVERY_LIMIT,
      signal: options.signal,
    });
    const files = entries.filter((entry) => entry.kind === "file").map((entry) => entry.path);
    return {
      bundles: files.some(
        (path) => path === MANIFEST_FILE_NAME || path.endsWith(`/${MANIFEST_FILE_NAME}`),
      ),
      states: files.some(isStateFile),
    };
  });
  if (found.bundles) return inspectBundlePath(options);
  if (found.states) return inspectStatePath(options);
  throw new WorkflowError(
    "nothing_to_inspect",
    `${options.path} holds no bundle (${MANIFEST_FILE_NAME}) and no destination state (${STATE_FILE_NAME})`,
  );
}

/**
 * Inspects the bundles under a local directory (the directory itself when it is a bundle) with
 * the default validation rules. `bundlePath` limits it to one bundle.
 */
export async function inspectBundlePath(
  options: InspectPathOptions,
  bundlePath?: string,
): Promise<BundleTreeInspection> {
  const backend = await openLocalDirectory(options.path);
  return withBackend(backend, async () => {
    const inspected = await inspectBundles(backend, bundlePath, {}, options);
    return { kind: "bundles", location: backend.location, ...inspected };
  });
}

/** Inspects every `.distributor.json` under a local directory. */
export async function inspectStatePath(options: InspectPathOptions): Promise<StateTreeInspection> {
  const backend = await openLocalDirectory(options.path);
  return withBackend(backend, async () => ({
    kind: "state",
    ok: true,
    location: backend.location,
    ...(await inspectStates(backend, options.signal, UNCONFIGURED_LIMITS)),
  }));
}

/** Inspects the source bundles of a configured pipeline, or the one at `bundlePath`. */
export async function inspectConfiguredSource(
  options: InspectConfiguredSourceOptions,
): Promise<BundleTreeInspection> {
  const { pipeline, prefix, backend } = await openConfiguredSource(options);
  return withBackend(backend, async () => {
    const inspected = await inspectBundles(
      backend,
      prefix,
      validationRules(pipeline.validation),
      options,
    );
    return { kind: "bundles", location: backend.location, pipeline_id: pipeline.id, ...inspected };
  });
}

/** Inspects the destination state of a configured destination. */
export async function inspectConfiguredDestination(
  options: InspectConfiguredDestinationOptions,
): Promise<StateTreeInspection> {
  const { pipeline, destination, backend } = await openConfiguredDestination(options, true);
  return withBackend(backend, async () => {
    const limits = destinationLimits(pipeline.id, destination);
    const found = await inspectStates(backend, options.signal, limits);
    const layout = destination.layout;
    let stagedWithoutState: ReleaseListing[] | undefined;
    if (layout.mode === "releases") {
      const listed = async (bundlePath: string) =>
        (await listReleases(backend, bundlePath, options.signal)).map(
          (release): ReleaseListing => ({
            id: release.id,
            current: release.current,
            recorded: release.recorded,
            status: release.current ? "live" : release.staged ? "staged" : "earlier",
            preview_url: release.staged ? previewUrlOf(layout.previewUrl, release.id) : null,
            source_id: release.source.id,
            source_created: formatStateTimestamp(release.source.created),
            source_digest: release.source.digest,
            published_at: formatStateTimestamp(release.publishedAt),
            outputs: release.outputs,
          }),
        );
      for (const state of found.states) {
        state.releases = await listed(state.path === "." ? "" : state.path);
      }
      // A destination root whose first publications were all staged has releases but no state.
      if (!found.states.some((state) => state.path === ".")) {
        const releases = await listed("");
        if (releases.length > 0) stagedWithoutState = releases;
      }
    }
    return {
      kind: "state",
      ok: true,
      location: backend.location,
      pipeline_id: pipeline.id,
      destination_id: destination.id,
      ...found,
      ...(stagedWithoutState === undefined ? {} : { staged_without_state: stagedWithoutState }),
    };
  });
}

async function inspectStates(
  backend: StorageBackend,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<Pick<StateTreeInspection, "states" | "leases_without_state">> {
  // Bundles never nest, so a root state is the only one; skip walking a large destination.
  if (await isFile(backend, STATE_FILE_NAME, signal)) {
    return {
      states: [await inspectStateFile(backend, STATE_FILE_NAME, signal, limits.stateBytes)],
      leases_without_state: [],
    };
  }
  const entries = await walkWithin(backend, "", limits.entries, { recursive: true, signal });
  const states: StateReport[] = [];
  for (const entry of entries) {
    if (entry.kind !== "file" || !isStateFile(entry.path)) continue;
    states.push(await inspectStateFile(backend, entry.path, signal, limits.stateBytes));
  }
  return { states, leases_without_state: await leasesWithoutState(backend, entries, signal) };
}

function inspectBundles(
  backend: StorageBackend,
  bundlePath: string | undefined,
  rules: ValidationRules,
  options: Pick<WorkflowOptions<ValidateEvent>, "signal" | "onEvent">,
): Promise<Omit<BundleTreeInspection, "kind" | "location" | "pipeline_id">> {
  return checkBundles(backend, bundlePath, options.signal, (path) =>
    inspectBundle(backend, path, rules, options),
  );
}

async function inspectBundle(
  backend: StorageBackend,
  bundlePath: string,
  rules: ValidationRules,
  options: Pick<WorkflowOptions<ValidateEvent>, "signal" | "onEvent">,
): Promise<BundleInspection> {
  const { signal, onEvent } = options;
  onEvent?.({ type: "bundle_started", bundle_path: bundlePath });
  let manifest: Manifest;
  try {
    manifest = await readManifest(backend, bundlePath, { signal, maxFiles: rules.maxFiles });
  } catch (error) {
    if (!(error instanceof BundleValidationError)) throw error;
    onEvent?.({ type: "bundle_checked", bundle_path: bundlePath, ok: false });
    return {
      path: displayPath(bundlePath),
      ok: false,
      manifest: null,
      files: [],
      total_size: null,
      unlisted_files: [],
      issues: issueReports(error.issues),
    };
  }

  const files = new Map<string, InspectedFile>(
    manifest.files.map((file) => [
      file.path,
      { path: file.path, sha256: file.sha256, size: file.size, status: "unchecked" },
    ]),
  );
  let issues: IssueReport[] = [];
  let unlisted: string[] = [];
  try {
    const validated = await validateBundle(backend, bundlePath, {
      ...rules,
      signal,
      onFile: (progress) => {
        const file = files.get(progress.path);
        if (file !== undefined && progress.ok) file.status = "ok";
        onEvent?.({ type: "file_checked", bundle_path: bundlePath, ...progress });
      },
    });
    unlisted = validated.unlistedFiles;
  } catch (error) {
    if (!(error instanceof BundleValidationError)) throw error;
    issues = issueReports(error.issues);
  }
  for (const issue of issues) {
    if (issue.code === "unlisted_file") unlisted.push(issue.path);
    const file = files.get(issue.path);
    if (file === undefined) continue;
    if (issue.code === "sha256_mismatch" && typeof issue.actual === "string") {
      file.status = "sha256_mismatch";
      file.actual_sha256 = issue.actual;
    } else if (issue.code === "size_mismatch") {
      file.status = "size_mismatch";
      if (issue.actual !== undefined) file.actual_size = issue.actual;
    } else if (
      issue.code === "missing_file" ||
      issue.code === "not_regular_file" ||
      issue.code === "unsupported_entry"
    ) {
      file.status = issue.code;
    }
  }
  const ok = issues.length === 0;
  onEvent?.({ type: "bundle_checked", bundle_path: bundlePath, ok });
  return {
    path: displayPath(bundlePath),
    ok,
    manifest: {
      schema_version: manifest.schemaVersion,
      id: manifest.id,
      created: formatTimestamp(manifest.created),
      digest: manifest.digest,
    },
    files: [...files.values()],
    total_size: manifest.files.reduce((sum, file) => sum + file.size, 0),
    unlisted_files: unlisted.sort(compareLogicalPaths),
    issues,
  };
}
