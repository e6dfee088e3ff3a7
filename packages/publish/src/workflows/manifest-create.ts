import { join } from "node:path";
import {
  BundleValidationError,
  createManifest,
  formatTimestamp,
  type Manifest,
  ManifestError,
} from "@distributor/bundle";
import { openLocalDirectory } from "./local-directory.js";
import { type WorkflowOptions, withBackend } from "./shared.js";

export interface CreateManifestWorkflowOptions extends WorkflowOptions {
  /** Local bundle directory. */
  path: string;
  /** Bundle id (SPEC §4 pattern). */
  id: string;
  /** Creation time; default now, truncated to whole seconds. */
  created?: Date;
  /** Replace an existing `manifest.json`. */
  force?: boolean;
}

/** The manifest written by `createManifestWorkflow`; the CLI prints it as JSON. */
export interface ManifestCreateReport {
  /** The bundle directory as given. */
  path: string;
  /** Where the manifest was written. */
  manifest_path: string;
  id: string;
  /** RFC 3339, UTC. */
  created: string;
  digest: string;
  /** Number of files listed. */
  files: number;
  /** Sum of the listed file sizes in bytes. */
  total_size: number;
}

/**
 * Writes `manifest.json` for a local bundle directory: every regular file below it, with streamed
 * digests and sizes. Refuses symlinks, and an existing manifest unless `force`.
 */
export async function createManifestWorkflow(
  options: CreateManifestWorkflowOptions,
): Promise<ManifestCreateReport> {
  const backend = await openLocalDirectory(options.path);
  return withBackend(backend, async () => {
    let manifest: Manifest;
    try {
      ({ manifest } = await createManifest(backend, "", {
        id: options.id,
        created: options.created,
        force: options.force,
        now: options.now,
        signal: options.signal,
      }));
    } catch (error) {
      throw namingDirectory(error, options.path);
    }
    return {
      path: options.path,
      manifest_path: join(options.path, "manifest.json"),
      id: manifest.id,
      created: formatTimestamp(manifest.created),
      digest: manifest.digest,
      files: manifest.files.length,
      total_size: manifest.files.reduce((sum, file) => sum + file.size, 0),
    };
  });
}

/** Bundle problems are reported against the directory the operator named, not the backend root. */
function namingDirectory(error: unknown, path: string): unknown {
  if (error instanceof ManifestError) {
    return new ManifestError(error.detail, {
      source: path,
      cause: error,
      ...(error.field === undefined ? {} : { field: error.field }),
    });
  }
  if (!(error instanceof BundleValidationError)) return error;
  const messages = error.issues.map((issue) => issue.message);
  const message =
    messages.length === 1
      ? `${path}: ${messages[0]}`
      : `${path}: ${messages.length} problems: ${messages.slice(0, 10).join("; ")}${messages.length > 10 ? "; ..." : ""}`;
  return new BundleValidationError(error.issues, { message, cause: error });
}
