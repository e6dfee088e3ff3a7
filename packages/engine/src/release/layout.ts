import { isReleaseId, peekSingleOwner, peekStateRelease } from "@distributor/state";
import {
  isStorageError,
  joinPrefix,
  type LinkOperations,
  locatePath,
  type StorageBackend,
  StorageError,
  statePath,
} from "@distributor/storage";
import { layoutMismatch } from "../plan/errors.js";

// Where the release layout keeps things below a destination bundle path (docs/design/releases.md):
//   releases/<id>/        one release: every output of one publication
//   releases/<id>.json    the state as committed for that release (what a rollback restores)
//   releases/<id>.files.json  what identified each file of the release when it was committed
//   releases/<id>.staging.json  the state a staged run of release <id> commits to, until its
//                         snapshot is written (then removed)
//   current               a symlink to `releases/<id>`, the release readers see
// The state and lease files stay where every layout keeps them, directly in the bundle path.

export const RELEASES_DIRECTORY = "releases";
export const CURRENT_LINK = "current";

/** Releases a destination keeps when its configuration says nothing (`releases.keep`). */
export const DEFAULT_RELEASES_KEPT = 5;

export function releasesPrefix(bundlePath: string): string {
  return joinPrefix(bundlePath, RELEASES_DIRECTORY);
}

export function releaseDirectory(bundlePath: string, id: string): string {
  return joinPrefix(bundlePath, `${RELEASES_DIRECTORY}/${id}`);
}

export function snapshotPath(bundlePath: string, id: string): string {
  return joinPrefix(bundlePath, `${RELEASES_DIRECTORY}/${id}.json`);
}

/**
 * `releases/<id>.files.json`: what identified each of the release's files when it was committed
 * (see identities.ts). Its name is not a release id, so listings of releases pass over it.
 */
export function identitiesPath(bundlePath: string, id: string): string {
  return joinPrefix(bundlePath, `${RELEASES_DIRECTORY}/${id}.files.json`);
}

/**
 * `releases/<id>.staging.json`: the state a run staging release `id` reads and writes in place of
 * the live state, so that the live state never records a release that is not live. Its name is
 * not a release id, so listings of releases pass over it; `storedReleases` notes it.
 */
export function stagingStatePath(bundlePath: string, id: string): string {
  return joinPrefix(bundlePath, `${RELEASES_DIRECTORY}/${id}.staging.json`);
}

export function currentLinkPath(bundlePath: string): string {
  return joinPrefix(bundlePath, CURRENT_LINK);
}

/** The text of a `current` link to release `id`: relative, so the tree can move as a whole. */
export function linkText(id: string): string {
  return `${RELEASES_DIRECTORY}/${id}`;
}

/** The release a `current` link's text names, or undefined for anything else. */
export function releaseOfLink(text: string | undefined): string | undefined {
  if (text === undefined || !text.startsWith(`${RELEASES_DIRECTORY}/`)) return undefined;
  const id = text.slice(RELEASES_DIRECTORY.length + 1);
  return isReleaseId(id) ? id : undefined;
}

/** The destination's links, or a clear refusal where the store has none (S3, memory). */
export function linksOf(backend: StorageBackend, bundlePath: string): LinkOperations {
  if (backend.links !== undefined) return backend.links;
  throw new StorageError({
    kind: "unsupported",
    operation: "switch link",
    backend: backend.name,
    path: currentLinkPath(bundlePath),
    detail: `layout: releases needs a store that makes hard links and renames a symlink over another atomically — a local directory, or an SFTP server offering hardlink@openssh.com and posix-rename@openssh.com; ${locatePath(backend.location, bundlePath)} does not`,
  });
}

/** The release `current` links to, undefined when there is no link yet. */
export async function liveRelease(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const path = currentLinkPath(bundlePath);
  const text = await linksOf(backend, bundlePath).readLink(path, { signal });
  if (text === undefined) return undefined;
  const id = releaseOfLink(text);
  if (id === undefined) {
    throw new StorageError({
      kind: "conflict",
      operation: "read link",
      backend: backend.name,
      path,
      detail: `links to "${text}", not to a release (releases/<id>); distributor switches this link itself — move it away`,
    });
  }
  return id;
}

/**
 * The layout a bundle path was published with, from what is stored there: `releases` when its
 * state records a release (or, with no readable state, a `current` link stands); `in_place` when
 * a readable state records none; undefined when nothing tells (no state and no link).
 */
export async function storedLayout(
  backend: StorageBackend,
  bundlePath: string,
  options: { maxStateBytes?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<"in_place" | "releases" | undefined> {
  const { signal } = options;
  let text: Uint8Array | undefined;
  try {
    text = await backend.readFile(statePath(bundlePath), {
      signal,
      ...(options.maxStateBytes === undefined ? {} : { maxBytes: options.maxStateBytes }),
    });
  } catch (error) {
    if (!isStorageError(error, "not_found") && !isStorageError(error, "limit_exceeded")) {
      throw error;
    }
  }
  if (text !== undefined && peekStateRelease(text) !== undefined) return "releases";
  if (text !== undefined && readableOwners(text)) return "in_place";
  if (backend.links === undefined) return text === undefined ? undefined : "in_place";
  try {
    const link = await backend.links.readLink(currentLinkPath(bundlePath), { signal });
    return link === undefined ? undefined : "releases";
  } catch (error) {
    // Something other than a link stands at `current`: an output published in place.
    if (isStorageError(error, "conflict")) return text === undefined ? undefined : "in_place";
    throw error;
  }
}

/** True when a state's text names its owner(s): it was written by a state writer, not garbled. */
function readableOwners(text: Uint8Array): boolean {
  return peekSingleOwner(text) !== undefined || Buffer.from(text).includes('"owners":');
}

/**
 * Refuses a bundle path stored in the other layout than the one configured, with
 * `unsupported_layout` and the way forward — the same verdict from every command.
 */
export async function assertLayout(
  backend: StorageBackend,
  bundlePath: string,
  configured: "in_place" | "releases",
  options: { maxStateBytes?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<void> {
  const stored = await storedLayout(backend, bundlePath, options);
  if (stored === undefined || stored === configured) return;
  const where = locatePath(backend.location, bundlePath === "" ? "." : bundlePath);
  throw layoutMismatch(where, stored);
}
