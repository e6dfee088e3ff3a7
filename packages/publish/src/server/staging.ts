import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import {
  ARCHIVE_LIMIT_CODES,
  ArchiveError,
  BundleValidationError,
  extractArchive,
  formatTimestamp,
  MAX_MANIFEST_BYTES,
  type Manifest,
  readManifest,
  validateBundle,
} from "@distributor/bundle";
import { createLocalBackend } from "@distributor/storage";
import type { PipelineConfig } from "../config/types.js";
import { HttpError } from "./http-error.js";
import type { ManifestIdentity } from "./store.js";

/** An upload extracted into its own staging directory. */
export interface StagedUpload {
  /** The upload's staging directory; the caller removes it. */
  directory: string;
  /** The bundle directory inside it. */
  bundleDirectory: string;
}

/**
 * The extraction limits of a pipeline's uploads: the bundle's own validation limits plus the
 * manifest, and room for one directory entry per file.
 */
export function extractionLimits(pipeline: PipelineConfig) {
  return {
    maxExtractedSize: pipeline.validation.maxTotalSize + MAX_MANIFEST_BYTES,
    maxEntries: 2 * (pipeline.validation.maxFiles + 1) + 1,
  };
}

/** Creates the upload's own directory below the staging directory. */
export function createUploadDirectory(stagingRoot: string): Promise<string> {
  return mkdtemp(join(stagingRoot, "upload-"));
}

/** Removes an upload's staging directory; a failure here must not hide the answer. */
export async function removeUploadDirectory(directory: string): Promise<void> {
  await rm(directory, { recursive: true, force: true }).catch(() => undefined);
}

/**
 * Streams the request body into `directory` through the archive extractor, refusing a body over
 * `maxUploadSize` as soon as it is exceeded (413). Archive problems become 422, its limits 413.
 */
export async function extractUpload(
  body: Readable,
  directory: string,
  pipeline: PipelineConfig,
  maxUploadSize: number,
): Promise<StagedUpload> {
  try {
    const extracted = await extractArchive(
      limitedBody(body, maxUploadSize),
      directory,
      extractionLimits(pipeline),
    );
    return { directory, bundleDirectory: join(directory, extracted.bundlePath) };
  } catch (error) {
    if (error instanceof HttpError) throw error;
    if (error instanceof ArchiveError) {
      const status = ARCHIVE_LIMIT_CODES.has(error.code) ? 413 : 422;
      throw new HttpError(status, error.code, `upload archive refused: ${error.message}`, {
        cause: error,
      });
    }
    throw new HttpError(
      400,
      "upload_incomplete",
      `upload body could not be read: ${message(error)}`,
      {
        cause: error,
      },
    );
  }
}

/** The body's chunks, failing once more than `limit` bytes arrived; never destroys the request. */
async function* limitedBody(body: Readable, limit: number): AsyncGenerator<Buffer> {
  let received = 0;
  for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    received += chunk.length;
    if (received > limit) {
      throw new HttpError(
        413,
        "upload_too_large",
        `upload body is larger than the pipeline's max_upload_size of ${limit} bytes`,
      );
    }
    yield chunk;
  }
}

/** The staged bundle's manifest identity, for comparing a retried upload with the accepted one. */
export async function stagedManifest(staged: StagedUpload): Promise<ManifestIdentity> {
  const backend = createLocalBackend({ root: staged.bundleDirectory });
  try {
    return identity(await readManifest(backend, ""));
  } catch (error) {
    throw invalidBundle(error);
  } finally {
    await backend.close().catch(() => undefined);
  }
}

/** Validates the staged bundle with the pipeline's validation policy (SPEC §4); 422 names the problem. */
export async function validateStaged(
  staged: StagedUpload,
  pipeline: PipelineConfig,
): Promise<ManifestIdentity> {
  const backend = createLocalBackend({ root: staged.bundleDirectory });
  try {
    const validated = await validateBundle(backend, "", {
      unlistedFiles: pipeline.validation.unlistedFiles,
      maxFiles: pipeline.validation.maxFiles,
      maxTotalSize: pipeline.validation.maxTotalSize,
    });
    return identity(validated.manifest);
  } catch (error) {
    throw invalidBundle(error);
  } finally {
    await backend.close().catch(() => undefined);
  }
}

function identity(manifest: Manifest): ManifestIdentity {
  return { id: manifest.id, digest: manifest.digest, created: formatTimestamp(manifest.created) };
}

function invalidBundle(error: unknown): unknown {
  if (!(error instanceof BundleValidationError)) return error;
  return new HttpError(422, "bundle_invalid", error.message, { cause: error });
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
