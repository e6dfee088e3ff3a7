import { DeleteObjectCommand, DeleteObjectsCommand, type S3Client } from "@aws-sdk/client-s3";
import {
  type DeleteOptions,
  mapBounded,
  parentPath,
  type StorageOperation,
} from "@distributor/storage";
import { versionMismatch } from "@distributor/storage/adapter";
import { describeFailure, kindOf, rejectsConditions, s3Error, statusOf } from "./errors.js";
import type { KeySpace } from "./keys.js";
import { listPages } from "./list.js";
import type { S3Objects } from "./objects.js";

/** DeleteObjects accepts at most this many keys per request. */
export const DELETE_BATCH = 1000;

/**
 * Deletes keys in requests of at most 1 000. Keys the service refuses are reported together (up to
 * ten shown), and no further batch is sent after a refusal.
 */
export async function deleteKeys(
  client: S3Client,
  bucket: string,
  keys: readonly string[],
  operation: StorageOperation,
  path: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  for (let start = 0; start < keys.length; start += DELETE_BATCH) {
    const batch = keys.slice(start, start + DELETE_BATCH);
    const response = await client.send(
      new DeleteObjectsCommand({
        Bucket: bucket,
        Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
      }),
      { abortSignal: signal },
    );
    const errors = response.Errors ?? [];
    if (errors.length === 0) continue;
    const failures = errors.map((error) => ({
      key: error.Key ?? "?",
      failure: { code: error.Code ?? "Error", status: undefined, message: error.Message ?? "" },
    }));
    const first = failures[0] as (typeof failures)[number];
    const kind = kindOf(first.failure);
    const shown = failures
      .slice(0, 10)
      .map(({ key, failure }) => describeFailure(failure, kindOf(failure), { bucket, key }))
      .join("; ");
    const more = failures.length > 10 ? `; and ${failures.length - 10} more` : "";
    throw s3Error(
      kind,
      operation,
      path,
      `${failures.length} of ${batch.length} keys were not deleted: ${shown}${more}`,
    );
  }
}

/** Lookups (HEADs, listings, aborts) that deletes and `abortUploads` run at once. */
export const INSPECT_CONCURRENCY = 16;
/** A delete of paths lists their directory when it holds at most this many keys per target. */
const LISTING_PER_TARGET = 8;
const LISTING_MINIMUM = 10_000;

/** The outcome of one fenced delete. */
type FencedDelete = { refused: false } | { refused: true; current: string | undefined };

/** Deletes of one backend: of given paths (checked first, fenced by version) and of a prefix. */
export class S3Deletes {
  readonly client: S3Client;
  readonly keys: KeySpace;
  readonly #bucket: string;

  constructor(readonly objects: S3Objects) {
    this.client = objects.client;
    this.keys = objects.keys;
    this.#bucket = objects.keys.bucket;
  }

  async deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    const fences = options.ifMatch;
    // A fenced delete HEADs its target anyway (see `#deleteIfMatch`), and one already gone is
    // fine when missing ones are: then only the others are looked at first, so releasing a
    // lease or deleting a few fenced paths lists nothing.
    const headed = (target: string) => options.ignoreMissing === true && fences?.has(target);
    const inspected = targets.filter((target) => !headed(target));
    const kinds = await this.#inspectTargets(inspected, options.signal);
    for (const target of inspected) {
      const kind = kinds.get(target);
      if (kind === "directory") {
        throw s3Error("unsupported", operation, target, "is a directory, not a managed file");
      }
      if (kind === undefined && !options.ignoreMissing)
        throw this.objects.notFound(operation, target);
    }
    // Directories are virtual: they vanish with their last key, so `pruneEmptyDirs` is implied.
    const present = targets.filter((target) => headed(target) || kinds.get(target) === "file");
    const fenced = present.filter((target) => fences?.has(target));
    await deleteKeys(
      this.client,
      this.#bucket,
      present.filter((target) => !fences?.has(target)).map((target) => this.keys.key(target)),
      operation,
      targets[0] ?? "",
      options.signal,
    );
    if (fences === undefined || fenced.length === 0) return;
    const refused = new Map<string, string | undefined>();
    await mapBounded(fenced, INSPECT_CONCURRENCY, async (target) => {
      const outcome = await this.#deleteIfMatch(
        target,
        fences.get(target) as string,
        options.signal,
      );
      if (outcome.refused) refused.set(target, outcome.current);
    });
    const first = targets.find((target) => refused.has(target));
    if (first !== undefined) {
      const expected = fences.get(first) as string;
      throw s3Error(
        "conflict",
        operation,
        first,
        `not deleted, the stored version moved on: ${versionMismatch(expected, refused.get(first))}`,
      );
    }
  }

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const { signal } = options;
    const operation = "delete prefix";
    const keep = new Set(options.keep ?? []);
    const pending: string[] = [];
    // The root always exists; only a named prefix can be missing.
    let found = prefix === "";
    const flush = async (all: boolean) => {
      while (pending.length >= 1000 || (all && pending.length > 0)) {
        const batch = pending.splice(0, 1000);
        await deleteKeys(this.client, this.#bucket, batch, operation, prefix, signal);
      }
    };
    if (prefix !== "" && (await this.objects.head(prefix, signal)) !== undefined) {
      found = true;
      pending.push(this.keys.key(prefix));
    }
    const below = this.keys.below(prefix);
    // Page by page: each page's keys are deleted before the next is listed, so memory stays bounded.
    for await (const page of listPages(this.client, this.#bucket, below, { signal })) {
      for (const object of page.objects) {
        if (object.Key === undefined) continue;
        const relative = object.Key.slice(below.length);
        // The root stays, and with it its folder marker.
        if (relative === "" && prefix === "") continue;
        found = true;
        if (keep.has(relative)) continue;
        pending.push(object.Key);
      }
      await flush(false);
    }
    await flush(true);
    if (!found && !options.ignoreMissing) throw this.objects.notFound(operation, prefix);
  }

  /**
   * Deletes `path` only while its ETag is `expected`. Ceph RGW as Debian ships it (16.2) ignores
   * `If-Match` on DeleteObject (seen: a wrong ETag still deletes), so the ETag is compared with a
   * HEAD first and the DELETE follows. On such a service this is NOT atomic: a write landing
   * between the HEAD and the DELETE is deleted. The DELETE still carries `If-Match`, so a service
   * that enforces it (AWS S3 documents it) closes that window and answers 412, which counts as moved. An
   * object already gone counts as deleted.
   */
  async #deleteIfMatch(
    path: string,
    expected: string,
    signal: AbortSignal | undefined,
  ): Promise<FencedDelete> {
    const current = (await this.objects.head(path, signal))?.version;
    if (current === undefined) return { refused: false };
    if (current !== expected) return { refused: true, current };
    const remove = (ifMatch: string | undefined) =>
      this.client.send(
        new DeleteObjectCommand({
          Bucket: this.#bucket,
          Key: this.keys.key(path),
          ...(ifMatch === undefined ? {} : { IfMatch: ifMatch }),
        }),
        { abortSignal: signal },
      );
    try {
      // Bare, as for PUT: Ceph RGW compares If-Match with the unquoted ETag.
      await remove(expected);
    } catch (error) {
      const status = statusOf(error);
      // A retry after a DELETE whose answer was lost finds nothing: deleted.
      if (status === 404) return { refused: false };
      if (status === 412) {
        const now = await this.objects.head(path, signal).catch(() => undefined);
        return { refused: true, current: now?.version };
      }
      // A service that refuses the header altogether: the HEAD above is the whole check.
      if (!rejectsConditions(error)) throw error;
      await remove(undefined);
    }
    return { refused: false };
  }

  /**
   * Whether each target is a file, a directory (keys below it) or missing. One listing of the
   * targets' common directory answers all of them when it is small enough; otherwise each target
   * is looked at on its own.
   */
  async #inspectTargets(
    targets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<Map<string, "file" | "directory">> {
    const kinds = new Map<string, "file" | "directory">();
    if (targets.length === 0) return kinds;
    const listed = await this.#listCommonDirectory(targets, signal);
    if (listed !== undefined) {
      for (const target of targets) {
        const key = this.keys.key(target);
        if (listed.files.has(key)) kinds.set(target, "file");
        else if (listed.directories.has(key)) kinds.set(target, "directory");
      }
      return kinds;
    }
    await mapBounded(targets, INSPECT_CONCURRENCY, async (target) => {
      if ((await this.objects.head(target, signal)) !== undefined) kinds.set(target, "file");
      else if (await this.objects.isDirectory(target, signal)) kinds.set(target, "directory");
    });
    return kinds;
  }

  async #listCommonDirectory(
    targets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<{ files: Set<string>; directories: Set<string> } | undefined> {
    const budget = Math.max(LISTING_MINIMUM, targets.length * LISTING_PER_TARGET);
    const common = commonDirectory(targets);
    const files = new Set<string>();
    const directories = new Set<string>();
    for await (const page of listPages(this.client, this.#bucket, this.keys.below(common), {
      signal,
    })) {
      for (const object of page.objects) {
        const key = object.Key;
        if (key === undefined) continue;
        if (!key.endsWith("/")) files.add(key);
        for (let slash = key.indexOf("/"); slash !== -1; slash = key.indexOf("/", slash + 1)) {
          directories.add(key.slice(0, slash));
        }
        if (files.size > budget) return undefined;
      }
    }
    return { files, directories };
  }
}

/** The deepest directory holding every target. */
function commonDirectory(targets: readonly string[]): string {
  let common = parentPath(targets[0] as string).split("/");
  for (const target of targets.slice(1)) {
    const segments = parentPath(target).split("/");
    let index = 0;
    while (index < common.length && common[index] === segments[index]) index++;
    common = common.slice(0, index);
  }
  return common.join("/");
}
