import { mkdtemp, open, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import {
  ARCHIVE_LIMIT_CODES,
  ArchiveError,
  BundleValidationError,
  extractArchive,
  formatTimestamp,
  type Manifest,
  manifestByteLimit,
  readManifest,
  validateBundle,
} from "@distributor/bundle";
import type { PipelineConfig } from "@distributor/publish";
import { bundleRefusalCode, signaturePolicy } from "@distributor/publish";
import { createLocalBackend } from "@distributor/storage";
import type { ManifestIdentity } from "@distributor/upload-store";
import { HttpError } from "../http-error.js";

/** An upload extracted into its own staging directory. */
export interface StagedUpload {
  /** The upload's staging directory; the caller removes it. */
  directory: string;
  /** The bundle directory inside it. */
  bundleDirectory: string;
  /** Body bytes received (set by `extractUpload`). */
  receivedBytes?: number;
  /** Bytes of the files extracted (set by `extractUpload`). */
  extractedBytes?: number;
}

/**
 * How many times `max_upload_size` an upload may expand to on the staging disk. Text compresses
 * about 3 to 10 times; 32 leaves room for very repetitive reports and stops a gzip bomb early.
 */
export const MAX_EXPANSION_RATIO = 32;

/**
 * The extraction limits of a pipeline's uploads: the bundle's own validation limits plus the
 * manifest, no more than `MAX_EXPANSION_RATIO` times `max_upload_size`, and room for one
 * directory entry per file.
 */
export function extractionLimits(pipeline: PipelineConfig) {
  const byValidation =
    pipeline.validation.maxTotalSize + manifestByteLimit(pipeline.validation.maxFiles);
  const byUpload =
    pipeline.source.backend === "http_upload"
      ? pipeline.source.maxUploadSize * MAX_EXPANSION_RATIO
      : Number.POSITIVE_INFINITY;
  return {
    maxExtractedSize: Math.min(byValidation, byUpload),
    maxEntries: 2 * (pipeline.validation.maxFiles + 1) + 1,
  };
}

/** Flushes of one staged upload kept in flight at once: the disk commits them together. */
const SYNC_TREE_CONCURRENCY = 16;

/**
 * Flushes every file and directory of a staged upload, and the directory holding it, to disk, so
 * that a durable store's `202` promises bytes that survive a power loss as well as a crash of the
 * process. Nothing is renamed after, so no flush must precede another: they run side by side,
 * which on a journalled filesystem costs little more than one (one after another, they made most
 * of an acceptance). The staging root's flush is shared by the uploads staged at the same time.
 */
export async function syncTree(directory: string): Promise<void> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  const paths = [directory, ...entries.map((entry) => join(entry.parentPath, entry.name))];
  let next = 0;
  const worker = async () => {
    while (next < paths.length) await flush(paths[next++]!);
  };
  // The staging root too: it holds the upload directory's own entry, without which a power loss
  // could take the whole directory with it.
  await Promise.all([
    sharedFlush(dirname(directory)),
    ...Array.from({ length: Math.min(SYNC_TREE_CONCURRENCY, paths.length) }, worker),
  ]);
}

async function flush(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The flush running for each directory, and the one asked for while it runs. */
const directoryFlushes = new Map<string, { running: Promise<void>; next?: Promise<void> }>();

/**
 * Flushes `directory`, sharing the flush with concurrent callers (group commit): each caller's
 * change (here, creating its upload directory) is done before it asks, so a flush that starts
 * after the ask covers it. While a flush runs, every new ask waits for the one next flush, which
 * starts when the running one ends; n uploads staged together cost about two flushes, not n.
 */
export function sharedFlush(directory: string): Promise<void> {
  const start = (): Promise<void> => {
    const running = flush(directory).finally(() => {
      const current = directoryFlushes.get(directory);
      if (current?.running !== running) return;
      if (current.next === undefined) directoryFlushes.delete(directory);
    });
    const entry = directoryFlushes.get(directory);
    if (entry === undefined) directoryFlushes.set(directory, { running });
    else {
      entry.running = running;
      entry.next = undefined;
    }
    return running;
  };
  const entry = directoryFlushes.get(directory);
  if (entry === undefined) return start();
  entry.next ??= entry.running.catch(() => undefined).then(start);
  return entry.next;
}

/** Every upload's own directory below the staging root starts so; nothing else there is ours. */
export const UPLOAD_DIRECTORY_PREFIX = "upload-";

/** Creates the upload's own directory below the staging directory. */
export function createUploadDirectory(stagingRoot: string): Promise<string> {
  return mkdtemp(join(stagingRoot, UPLOAD_DIRECTORY_PREFIX));
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
  contentType = "application/x-tar",
): Promise<StagedUpload> {
  const counted = { bytes: 0 };
  try {
    const extracted = await extractArchive(
      checkedFormat(limitedBody(body, maxUploadSize, counted), contentType),
      directory,
      extractionLimits(pipeline),
    );
    return {
      directory,
      bundleDirectory: join(directory, extracted.bundlePath),
      receivedBytes: counted.bytes,
      extractedBytes: extracted.bytes,
    };
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
async function* limitedBody(
  body: Readable,
  limit: number,
  counted: { bytes: number },
): AsyncGenerator<Buffer> {
  for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    counted.bytes += chunk.length;
    if (counted.bytes > limit) {
      throw new HttpError(
        413,
        "upload_too_large",
        `upload body is larger than the pipeline's max_upload_size of ${limit} bytes`,
      );
    }
    yield chunk;
  }
}

const GZIP_TYPES: ReadonlySet<string> = new Set(["application/gzip", "application/x-gzip"]);

/**
 * Passes the body on once its first bytes agree with its Content-Type: a body declared gzip that
 * is not, or that is neither gzip nor tar, is refused naming that, not with a tar parser's error.
 */
async function* checkedFormat(
  body: AsyncIterable<Buffer>,
  contentType: string,
): AsyncGenerator<Buffer> {
  let head: Buffer | undefined = Buffer.alloc(0);
  for await (const chunk of body) {
    if (head === undefined) {
      yield chunk;
      continue;
    }
    head = Buffer.concat([head, chunk]);
    if (head.length < USTAR_END) continue;
    checkHead(head, contentType);
    yield head;
    head = undefined;
  }
  if (head !== undefined && head.length > 0) {
    checkHead(head, contentType);
    yield head;
  }
}

/** Where a POSIX tar header says `ustar`. */
const USTAR_START = 257;
const USTAR_END = 262;

function checkHead(head: Buffer, contentType: string) {
  const gzip = head[0] === 0x1f && head[1] === 0x8b;
  if (gzip) return;
  if (GZIP_TYPES.has(contentType)) {
    throw new HttpError(
      422,
      "invalid_archive",
      `upload body is not gzip (it does not start with the gzip signature 1f 8b) although Content-Type is ${contentType}`,
    );
  }
  if (head.subarray(USTAR_START, USTAR_END).toString("latin1") !== "ustar") {
    throw new HttpError(
      422,
      "invalid_archive",
      "upload body is neither gzip nor a tar archive (no gzip signature, no ustar header)",
    );
  }
}

/** The staged bundle's manifest identity, for comparing a retried upload with the accepted one. */
export async function stagedManifest(
  staged: StagedUpload,
  pipeline: PipelineConfig,
): Promise<ManifestIdentity> {
  const backend = createLocalBackend({ root: staged.bundleDirectory, blockingCalls: false });
  try {
    return identity(await readManifest(backend, "", { maxFiles: pipeline.validation.maxFiles }));
  } catch (error) {
    throw invalidBundle(error);
  } finally {
    await backend.close().catch(() => undefined);
  }
}

/**
 * Validates the staged bundle with the pipeline's validation policy (docs/design/bundles.md) and, under
 * `source.signatures`, its signature (docs/integrations/signed-bundles.md); 422 names the problem.
 */
export async function validateStaged(
  staged: StagedUpload,
  pipeline: PipelineConfig,
  options: { now?: (() => Date) | undefined } = {},
): Promise<ManifestIdentity> {
  const signatures = await signaturePolicy(pipeline, options);
  const backend = createLocalBackend({ root: staged.bundleDirectory, blockingCalls: false });
  try {
    const validated = await validateBundle(backend, "", {
      unlistedFiles: pipeline.validation.unlistedFiles,
      maxFiles: pipeline.validation.maxFiles,
      maxTotalSize: pipeline.validation.maxTotalSize,
      portableNames: pipeline.validation.portableNames ? "refuse" : "warn",
      ...(signatures === undefined ? {} : { signatures }),
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
  return new HttpError(422, bundleRefusalCode(error), error.message, { cause: error });
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
