import {
  checkKeptReleases,
  type DestinationLimits,
  ReleaseView,
  walkWithin,
} from "@distributor/engine";
import { isWithinPrefix, type StorageBackend, type StorageEntry } from "@distributor/storage";
import { findDestination, findPipeline } from "../backends/configured-location.js";
import type { Config, DestinationConfig } from "../config/types.js";
import { WorkflowError } from "../errors.js";

/** Under the release layout: which release the state records and which `current` links to. */
export interface ReleaseReport {
  /** The release the state's records describe; null when it records none. */
  recorded: string | null;
  /** The release `current` links to; null when there is no link. */
  current: string | null;
  /**
   * Every committed release checked against what was committed (`audit --release all`, the
   * default), or only the one `current` links to (`--release current`), oldest first.
   */
  releases: KeptReleaseReport[];
}

/** One committed release compared with what identified its files when it was committed. */
export interface KeptReleaseReport {
  id: string;
  /** `current` links to it. */
  current: boolean;
  /** The state records it. */
  recorded: boolean;
  /**
   * `live` (`current` links to it), `staged` (newer than the live release, waiting for
   * `distributor promote`) or `earlier` (what a rollback returns to).
   */
  role: "live" | "staged" | "earlier";
  /** `ok`, or `drift` when a file changed, went missing or was added since the commit. */
  status: "ok" | "drift";
  /**
   * `identities`: each file's recorded identity (inode, size, modification time); `sizes`: a
   * release committed before identities were recorded, compared by its snapshot's sizes.
   */
  method: "identities" | "sizes";
  changed: string[];
  missing: string[];
  added: string[];
  /** The release directory is gone although its snapshot is there. */
  directory_missing: boolean;
  /**
   * The release the state records has no snapshot (`releases/<id>.json`): nothing to roll back
   * to until the next `run` writes it from the state.
   */
  snapshot_missing: boolean;
}

/** Which releases `audit` checks: every committed one, or the one `current` links to. */
export type ReleaseSelection = "all" | "current";

/**
 * What maintenance reads of one bundle path: the destination itself under the default layout;
 * under the release layout a view in which the outputs of the release the state records lie
 * directly in the bundle path (the other releases, the snapshots and `current` out of sight),
 * with the listing as that view shows it and which release is in force.
 */
export async function bundleScope(
  backend: StorageBackend,
  destination: DestinationConfig,
  bundlePath: string,
  entries: readonly StorageEntry[],
  options: {
    limits: DestinationLimits;
    releases?: ReleaseSelection | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<{
  backend: StorageBackend;
  entries: readonly StorageEntry[];
  release: ReleaseReport | null;
}> {
  if (destination.layout.mode !== "releases") return { backend, entries, release: null };
  const view = new ReleaseView(backend, bundlePath);
  const [listed, recorded, current] = await Promise.all([
    walkWithin(view, bundlePath, options.limits.entries, {
      recursive: true,
      signal: options.signal,
    }),
    view.stateRelease(options.signal),
    view.live(options.signal),
  ]);
  const only =
    options.releases === "current" ? (current === undefined ? [] : [current]) : undefined;
  const checks = await checkKeptReleases(backend, bundlePath, {
    limits: options.limits,
    only,
    signal: options.signal,
  });
  const base = current ?? recorded;
  const roleOf = (id: string): KeptReleaseReport["role"] =>
    id === current ? "live" : base === undefined || id > base ? "staged" : "earlier";
  const releases: KeptReleaseReport[] = checks.map((check) => ({
    id: check.id,
    current: check.id === current,
    recorded: check.id === recorded,
    role: roleOf(check.id),
    status:
      check.directoryMissing || check.changed.length + check.missing.length + check.added.length > 0
        ? "drift"
        : "ok",
    method: check.identities ? "identities" : "sizes",
    changed: check.changed,
    missing: check.missing,
    added: check.added,
    directory_missing: check.directoryMissing,
    snapshot_missing: false,
  }));
  if (
    recorded !== undefined &&
    (only === undefined || only.includes(recorded)) &&
    !checks.some((check) => check.id === recorded)
  ) {
    releases.push({
      id: recorded,
      current: recorded === current,
      recorded: true,
      role: roleOf(recorded),
      status: "drift",
      method: "identities",
      changed: [],
      missing: [],
      added: [],
      directory_missing: false,
      snapshot_missing: true,
    });
    releases.sort((left, right) => (left.id < right.id ? -1 : 1));
  }
  // Entries outside the bundle path stay as they are (a nested bundle path's, say).
  const outside = entries.filter((entry) => !isWithinPrefix(bundlePath, entry.path));
  return {
    backend: view,
    entries: [...outside, ...listed],
    release: { recorded: recorded ?? null, current: current ?? null, releases },
  };
}

/**
 * Refuses a maintenance command that changes records or outputs in place on a destination with
 * `layout: releases`: a published release is never changed, and those commands would edit its
 * records or files behind its snapshot's back.
 */
export function refuseReleaseLayout(
  config: Config,
  where: { pipelineId: string; destinationId: string },
  command: string,
  instead: string,
): void {
  const layout = findDestination(
    findPipeline(config, where.pipelineId),
    where.destinationId,
  ).layout;
  if (layout.mode !== "releases") return;
  throw new WorkflowError(
    "unsupported_layout",
    `destination ${where.destinationId} has layout: releases, whose releases are never changed once published, so ${command} does not apply: ${instead}`,
  );
}
