import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import type { Config, S3Location } from "@distributor/publish";
import { type BackendRegistry, openBackend } from "@distributor/publish";
import {
  createLocalBackend,
  DEFAULT_LISTING_LIMIT,
  isStorageError,
  type StorageBackend,
} from "@distributor/storage";
import type { UploadJob } from "@distributor/upload-store";
import { removeUploadDirectory, type StagedUpload, UPLOAD_DIRECTORY_PREFIX } from "./staging.js";

/**
 * On shared staging, how old an upload that no live run owns must be before a starting instance
 * removes it: a younger one may be an upload another instance is still receiving.
 */
export const SHARED_STAGING_GRACE_MS = 60 * 60 * 1000;

/** Most staged uploads a start-up clean-up looks at in a remote staging location. */
const REMOTE_LISTING_LIMIT = DEFAULT_LISTING_LIMIT;

/**
 * Where accepted bundles wait for their run (docs/config.md `server.staging`): this instance's staging
 * directory, a directory every instance mounts, or an S3 bucket/prefix. Uploads are always
 * received and extracted into a local directory, `receiveRoot`; `place` then makes the bundle
 * readable by whichever instance runs it.
 */
export interface StagingArea {
  /** Local directory where upload bodies are received and extracted. */
  readonly receiveRoot: string;
  /** True when other instances use it too: start-up clean-up then spares young data. */
  readonly shared: boolean;
  /** True when `place` copies the bundle elsewhere: the local files need no fsync. */
  readonly remote: boolean;
  /** The S3 staging location, rooted at its prefix, where partial uploads live too; else undefined. */
  readonly remoteRoot: StorageBackend | undefined;
  /** Where the accepted upload's bundle waits, as the job records it. */
  place(staged: StagedUpload): Promise<Pick<UploadJob, "stagingDirectory" | "bundleDirectory">>;
  /** False when the job's staged bundle is gone. */
  exists(job: UploadJob): Promise<boolean>;
  /** The job's bundle as a run's source. */
  openSource(job: UploadJob, signal?: AbortSignal): Promise<StorageBackend>;
  /** Removes the job's staged data; never fails (an orphan is removed at a later start). */
  remove(job: Pick<UploadJob, "stagingDirectory">): Promise<void>;
  /** Removes staged data that no live job owns (shared: only data older than the grace). */
  removeOrphans(live: ReadonlySet<string>, now: number): Promise<number>;
  close(): Promise<void>;
}

export async function openStagingArea(
  config: Config,
  registry: BackendRegistry | undefined,
): Promise<StagingArea> {
  const staging = config.server.staging;
  if (staging === undefined) return localStagingArea(config.server.http.stagingDirectory, false);
  if (staging.backend === "local") return localStagingArea(staging.path, true);
  return remoteStagingArea(config, staging, registry);
}

function localStagingArea(root: string, shared: boolean): StagingArea {
  return {
    receiveRoot: root,
    shared,
    remote: false,
    remoteRoot: undefined,
    async place(staged) {
      return { stagingDirectory: staged.directory, bundleDirectory: staged.bundleDirectory };
    },
    exists: (job) => exists(job.bundleDirectory),
    async openSource(job) {
      return createLocalBackend({ root: job.bundleDirectory, blockingCalls: false });
    },
    remove: (job) => removeUploadDirectory(job.stagingDirectory),
    removeOrphans: (live, now) => removeLocalOrphans(root, live, shared ? now : undefined),
    close: async () => undefined,
  };
}

/**
 * S3 staging: each accepted bundle is copied to `<prefix>/upload-<accepted ms>-<uuid>/`, the name
 * carrying its age (listing S3 "directories" gives no times), and its local copy removed. The run
 * reads it straight from the bucket.
 */
async function remoteStagingArea(
  config: Config,
  location: S3Location,
  registry: BackendRegistry | undefined,
): Promise<StagingArea> {
  const secrets = config.secrets;
  const open = (prefix: string, signal?: AbortSignal) =>
    openBackend(
      registry,
      { ...location, prefix: [location.prefix, prefix].filter((part) => part !== "").join("/") },
      { role: "source", secrets, ...(signal ? { signal } : {}) },
    );
  const backend = await open("");
  const receiveRoot = config.server.http.stagingDirectory;
  return {
    receiveRoot,
    shared: true,
    remote: true,
    remoteRoot: backend,
    async place(staged) {
      const name = `${UPLOAD_DIRECTORY_PREFIX}${Date.now()}-${randomUUID()}`;
      try {
        const entries = await readdir(staged.bundleDirectory, {
          withFileTypes: true,
          recursive: true,
        });
        for (const entry of entries) {
          if (!entry.isFile()) continue;
          const file = join(entry.parentPath, entry.name);
          const path = relative(staged.bundleDirectory, file).split(sep).join("/");
          await backend.writeFile(`${name}/${path}`, createReadStream(file));
        }
      } catch (error) {
        await backend.deletePrefix(name, { ignoreMissing: true }).catch(() => undefined);
        throw error;
      }
      await removeUploadDirectory(staged.directory);
      return { stagingDirectory: name, bundleDirectory: name };
    },
    async exists(job) {
      try {
        await backend.stat(`${job.bundleDirectory}/manifest.json`);
        return true;
      } catch (error) {
        if (isStorageError(error) && error.kind === "not_found") return false;
        throw error;
      }
    },
    openSource: (job, signal) => open(job.bundleDirectory, signal),
    async remove(job) {
      await backend
        .deletePrefix(job.stagingDirectory, { ignoreMissing: true })
        .catch(() => undefined);
    },
    async removeOrphans(live, now) {
      // Uploads this instance was receiving when it stopped, then the shared bucket's orphans.
      let removed = await removeLocalOrphans(receiveRoot, new Set(), now);
      const cutoff = now - SHARED_STAGING_GRACE_MS;
      for (const entry of await backend.walk("", {
        recursive: false,
        limit: REMOTE_LISTING_LIMIT,
      })) {
        const match = /^upload-(\d+)-/.exec(entry.path);
        if (match === null || live.has(entry.path) || Number(match[1]) >= cutoff) continue;
        await backend.deletePrefix(entry.path, { ignoreMissing: true });
        removed += 1;
      }
      return removed;
    },
    close: () => backend.close(),
  };
}

/** Removes `upload-*` directories of `root` not in `live`; with `now`, only those past the grace. */
async function removeLocalOrphans(
  root: string,
  live: ReadonlySet<string>,
  now: number | undefined,
): Promise<number> {
  let removed = 0;
  for (const name of await readdir(root)) {
    const path = join(root, name);
    if (!name.startsWith(UPLOAD_DIRECTORY_PREFIX) || live.has(path)) continue;
    if (now !== undefined && !(await olderThan(path, now - SHARED_STAGING_GRACE_MS))) continue;
    await removeUploadDirectory(path);
    removed += 1;
  }
  return removed;
}

/** True when `path` was last modified before `cutoff` (epoch ms); false when it is gone. */
async function olderThan(path: string, cutoff: number): Promise<boolean> {
  try {
    return (await stat(path)).mtimeMs < cutoff;
  } catch {
    return false;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
