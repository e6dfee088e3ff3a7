import type { Readable } from "node:stream";
import { newReleaseId, peekStateRelease } from "@distributor/state";
import {
  type ByteReader,
  compareLogicalPaths,
  type DeleteOptions,
  isReservedName,
  isStorageError,
  isWithinPrefix,
  joinPrefix,
  type OperationOptions,
  type ReadOptions,
  relativeTo,
  type StorageBackend,
  type StorageEntry,
  StorageError,
  type StorageOperation,
  statePath,
  type VersionedFile,
  type WalkOptions,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "../protocol/limits.js";
import { entryAt } from "./entry-at.js";
import { checkRelease, readIdentities } from "./identities.js";
import { liveRelease, releaseDirectory } from "./layout.js";

/**
 * How a new release got the files it keeps from the previous one: clones (their own inodes,
 * sharing data blocks) or hard links (the same inodes).
 */
export type CarryMethod = "clone" | "hard_link";

/** Entries directly in a bundle path besides its releases: the state, lease and temp files. */
const BUNDLE_LEVEL_LIMIT = 10_000;

/**
 * A destination bundle path under the release layout, seen as the default layout sees one: the
 * state and lease files where they always are, and the outputs of one release as if they lay
 * directly in the bundle path. The engine plans, executes and recovers through it unchanged.
 *
 * Which release a path means (docs/design/releases.md):
 * - reads: the release the state last read or written through the view records — until the
 *   view is prepared, then the new release (`next`), which then holds every output;
 * - writes and deletes: the new release once prepared (`prepare`: a hard-linked copy of the
 *   state's release). Before that, a state whose release `current` does not link to yet (its
 *   run died between the commit and the switch) is changed in place: recovery finishing that
 *   run's deletes there is what must happen before it goes live. Otherwise nothing of a
 *   recovery's lies in any kept release (a dead run wrote into its own, swept later): deletes do
 *   nothing, a rewrite that fences a late write (`ifMatch`) leaves the file as it is, and other
 *   writes are refused.
 * The release `current` links to is never written.
 *
 * A view that builds a release trusts a file of the state's release only while it is still the
 * one committed (its identity record, see identities.ts): a file edited in place since is seen
 * as missing — planning writes it again from the source, and the new release does not link it.
 */
export class ReleaseView implements StorageBackend {
  readonly name: string;
  readonly location: string;
  readonly writeConcurrency?: number;
  readonly versionsMayRepeat?: boolean;
  readonly storesObjectMetadata?: boolean;
  readonly maxPathBytes?: number;
  /** The release the last state read or written through the view records. */
  #stateRelease: string | undefined;
  #stateSeen = false;
  /** What `current` links to, once read; kept up to date by `switched`. */
  #live: string | undefined | null = null;
  #prepared = false;
  /** Files of the state's release that changed since it was committed (building views only). */
  #changed: Promise<ReadonlySet<string>> | undefined;
  #changedFor: string | undefined;
  /** Files of the new release cloned from the previous one: their own version, and the original's. */
  readonly #clones = new Map<string, { clone: string | undefined; origin: string | undefined }>();
  #carried: CarryMethod | undefined;

  constructor(
    readonly inner: StorageBackend,
    readonly bundlePath: string,
    /** The release this view's publication builds; absent for a view that only reads. */
    readonly next?: string,
    /** The destination's bounds, for the listings the view makes of a release. */
    readonly limits: DestinationLimits = DEFAULT_DESTINATION_LIMITS,
  ) {
    this.name = inner.name;
    this.location = inner.location;
    if (inner.writeConcurrency !== undefined) this.writeConcurrency = inner.writeConcurrency;
    if (inner.versionsMayRepeat) this.versionsMayRepeat = true;
    if (inner.storesObjectMetadata) this.storesObjectMetadata = true;
    if (inner.maxPathBytes !== undefined) {
      // `<bundle>/x` is stored as `<bundle>/releases/<id>/x`, whatever the bundle path.
      const id = next ?? newReleaseId(new Date(0));
      const overhead = Buffer.byteLength(`${releaseDirectory("", id)}/`);
      this.maxPathBytes = inner.maxPathBytes - overhead;
    }
  }

  /** The release the state last seen through the view records (reading it if not seen yet). */
  async stateRelease(signal?: AbortSignal): Promise<string | undefined> {
    if (!this.#stateSeen) {
      try {
        this.#see(await this.inner.readFile(statePath(this.bundlePath), { signal }));
      } catch (error) {
        if (!isStorageError(error, "not_found")) throw error;
        this.#stateSeen = true;
        this.#stateRelease = undefined;
      }
    }
    return this.#stateRelease;
  }

  /** What `current` links to (read once, then kept up to date by `switched`). */
  async live(signal?: AbortSignal): Promise<string | undefined> {
    if (this.#live === null) this.#live = await liveRelease(this.inner, this.bundlePath, signal);
    return this.#live;
  }

  /** Called once `current` links to `id`. */
  switched(id: string): void {
    this.#live = id;
  }

  /**
   * Files of release `id` (the state's) whose identity is no longer the one committed: what a
   * building view hides, and what the new release writes again. Empty for a view that only reads,
   * and for a release committed before identity records were kept.
   */
  async changedFiles(id: string, signal?: AbortSignal): Promise<ReadonlySet<string>> {
    if (this.next === undefined) return new Set();
    if (this.#changed === undefined || this.#changedFor !== id) {
      this.#changedFor = id;
      this.#changed = this.#findChanged(id, signal);
      // A failed look is tried again by the next caller rather than remembered.
      this.#changed.catch(() => {
        this.#changed = undefined;
      });
    }
    return this.#changed;
  }

  /** The changed files found so far (by planning or preparing), sorted; none when none were looked for. */
  async changedSoFar(): Promise<string[]> {
    if (this.#changed === undefined) return [];
    return [...(await this.#changed)].sort();
  }

  async #findChanged(id: string, signal?: AbortSignal): Promise<ReadonlySet<string>> {
    // Only a release with identities is looked at: an earlier version's releases are trusted as
    // they were before identities were recorded (their sizes are checked by planning anyway).
    if (
      (await readIdentities(this.inner, this.bundlePath, id, this.limits, signal)) === undefined
    ) {
      return new Set();
    }
    const check = await checkRelease(this.inner, this.bundlePath, id, {
      limits: this.limits,
      signal,
    });
    return new Set(check.changed);
  }

  /** True when `path` (logical, below the bundle path) is a changed file of release `id`. */
  async #hidden(id: string, path: string, signal?: AbortSignal): Promise<boolean> {
    if (this.#prepared || this.next === undefined) return false;
    const changed = await this.changedFiles(id, signal);
    return changed.size > 0 && changed.has(relativeTo(this.bundlePath, path));
  }

  /** Records that `path` (relative to the bundle path) of the new release is a clone. */
  noteClone(path: string, clone: string | undefined, origin: string | undefined): void {
    this.#clones.set(path, { clone, origin });
  }

  /** Records how the new release got the files it keeps. */
  carriedBy(method: CarryMethod): void {
    this.#carried = method;
  }

  /** How this view's new release got the files it keeps; undefined before it was prepared. */
  get carried(): CarryMethod | undefined {
    return this.#carried;
  }

  /**
   * The version a reader of the view sees for a file of the new release: a clone still as it was
   * made answers with the version of the file it was cloned from, as a hard link would.
   */
  #logical(path: string, version: string | undefined): string | undefined {
    if (!this.#prepared || this.#clones.size === 0 || version === undefined) return version;
    const clone = this.#clones.get(relativeTo(this.bundlePath, path));
    return clone !== undefined && clone.clone === version && clone.origin !== undefined
      ? clone.origin
      : version;
  }

  /** The stored version behind a version the view answered with (see `#logical`). */
  #physical(path: string, version: string): string {
    if (!this.#prepared || this.#clones.size === 0) return version;
    const clone = this.#clones.get(relativeTo(this.bundlePath, path));
    return clone?.origin === version && clone.clone !== undefined ? clone.clone : version;
  }

  get prepared(): boolean {
    return this.#prepared;
  }

  /** From now on reads and writes below the bundle path mean the new release. */
  markPrepared(): void {
    if (this.next === undefined) throw new Error("a release view that only reads builds nothing");
    this.#prepared = true;
  }

  // --- paths ---------------------------------------------------------------------------------

  /** True for a path the view passes through: outside the bundle path, or one of its own files. */
  #passes(path: string): boolean {
    if (!isWithinPrefix(this.bundlePath, path) || path === this.bundlePath) return true;
    const relative = relativeTo(this.bundlePath, path);
    return !relative.includes("/") && isReservedName(relative);
  }

  #inRelease(id: string, path: string): string {
    return joinPrefix(releaseDirectory(this.bundlePath, id), relativeTo(this.bundlePath, path));
  }

  async #readRelease(signal?: AbortSignal): Promise<string | undefined> {
    if (this.#prepared) return this.next as string;
    return this.stateRelease(signal);
  }

  /** The release writes and deletes go to; undefined when there is none (see the class comment). */
  async #writeRelease(signal?: AbortSignal): Promise<string | undefined> {
    if (this.#prepared) return this.next as string;
    const recorded = await this.stateRelease(signal);
    if (recorded !== undefined && recorded !== (await this.live(signal))) return recorded;
    return undefined;
  }

  /** Notes state bytes read or written other than through this view's own state path. */
  protected observeState(bytes: Uint8Array | string): void {
    this.#see(bytes);
  }

  #see(bytes: Uint8Array | string): void {
    this.#stateRelease = peekStateRelease(bytes);
    this.#stateSeen = true;
  }

  #isState(path: string): boolean {
    return path === statePath(this.bundlePath);
  }

  #notFound(operation: StorageOperation, path: string): StorageError {
    return new StorageError({ kind: "not_found", operation, backend: this.name, path });
  }

  // --- reads ---------------------------------------------------------------------------------

  async readFile(path: string, options: ReadOptions = {}): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  async readVersioned(path: string, options: ReadOptions = {}): Promise<VersionedFile> {
    if (this.#passes(path)) {
      const read = await this.inner.readVersioned(path, options);
      if (this.#isState(path)) this.#see(read.bytes);
      return read;
    }
    const release = await this.#readRelease(options.signal);
    if (release === undefined || (await this.#hidden(release, path, options.signal))) {
      throw this.#notFound("read file", path);
    }
    const read = await this.inner.readVersioned(this.#inRelease(release, path), options);
    return { ...read, version: this.#logical(path, read.version) as string };
  }

  async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    if (this.#passes(path)) return this.inner.openRead(path, options);
    const release = await this.#readRelease(options.signal);
    if (release === undefined || (await this.#hidden(release, path, options.signal))) {
      throw this.#notFound("read file", path);
    }
    return this.inner.openRead(this.#inRelease(release, path), options);
  }

  get openReader():
    | ((path: string, options?: OperationOptions) => Promise<ByteReader>)
    | undefined {
    const open = this.inner.openReader?.bind(this.inner);
    if (open === undefined) return undefined;
    return async (path, options = {}) => {
      if (this.#passes(path)) return open(path, options);
      const release = await this.#readRelease(options.signal);
      if (release === undefined || (await this.#hidden(release, path, options.signal))) {
        throw this.#notFound("open reader", path);
      }
      return open(this.#inRelease(release, path), options);
    };
  }

  async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    if (this.#passes(path)) return this.inner.stat(path, options);
    const release = await this.#readRelease(options.signal);
    if (release === undefined || (await this.#hidden(release, path, options.signal))) {
      throw this.#notFound("stat", path);
    }
    const entry = await this.inner.stat(this.#inRelease(release, path), options);
    return entryAt(path, entry, this.#logical(path, entry.version));
  }

  async walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    if (!isWithinPrefix(this.bundlePath, prefix)) return this.inner.walk(prefix, options);
    const entries: StorageEntry[] = [];
    if (prefix === this.bundlePath) entries.push(...(await this.#ownFiles(options.signal)));
    const release = await this.#readRelease(options.signal);
    if (release !== undefined) {
      const physical = this.#inRelease(release, prefix);
      // Looked up once for the whole listing: a release may hold a million files.
      const hidden =
        this.#prepared || this.next === undefined
          ? undefined
          : await this.changedFiles(release, options.signal);
      for (const entry of await this.#walkOrNothing(physical, options)) {
        const path = joinPrefix(prefix, relativeTo(physical, entry.path));
        if (entry.kind === "file" && hidden?.has(relativeTo(this.bundlePath, path))) continue;
        entries.push(entryAt(path, entry, this.#logical(path, entry.version)));
      }
    }
    if (entries.length > options.limit) {
      throw new StorageError({
        kind: "limit_exceeded",
        operation: "walk",
        backend: this.name,
        path: prefix,
        detail: `more than ${options.limit} entries`,
      });
    }
    return entries.sort((left, right) => compareLogicalPaths(left.path, right.path));
  }

  async hasAny(prefix: string, options: OperationOptions = {}): Promise<boolean> {
    if (!isWithinPrefix(this.bundlePath, prefix)) return this.inner.hasAny(prefix, options);
    if (prefix === this.bundlePath && (await this.#ownFiles(options.signal)).length > 0) {
      return true;
    }
    const release = await this.#readRelease(options.signal);
    if (release === undefined) return false;
    return this.inner.hasAny(this.#inRelease(release, prefix), options);
  }

  /** The state, lease and temp files directly in the bundle path. */
  async #ownFiles(signal: AbortSignal | undefined): Promise<StorageEntry[]> {
    const listing = await this.#walkOrNothing(this.bundlePath, {
      limit: BUNDLE_LEVEL_LIMIT,
      signal,
    });
    return listing.filter((entry) => {
      const name = relativeTo(this.bundlePath, entry.path);
      return entry.kind === "file" && !name.includes("/") && isReservedName(name);
    });
  }

  async #walkOrNothing(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    try {
      return await this.inner.walk(prefix, options);
    } catch (error) {
      if (isStorageError(error, "not_found")) return [];
      throw error;
    }
  }

  // --- writes --------------------------------------------------------------------------------

  async writeFile(path: string, data: WriteData, options: WriteOptions = {}): Promise<WriteResult> {
    if (this.#passes(path)) {
      const written = await this.inner.writeFile(path, data, options);
      if (this.#isState(path) && (data instanceof Uint8Array || typeof data === "string")) {
        this.#see(data);
      }
      return written;
    }
    const release = await this.#writeRelease(options.signal);
    if (release === undefined && options.ifMatch !== undefined) {
      // Recovery rewriting an output in place to fence a late write of a dead run: no run ever
      // writes into a kept release (a dead one wrote into its own), so the file stands as it is.
      return this.#fenced(path, options.ifMatch, options.signal);
    }
    if (release === undefined) {
      throw new StorageError({
        kind: "unsupported",
        operation: "write file",
        backend: this.name,
        path,
        detail: "no release is being built to write into (the release view is not prepared)",
      });
    }
    const fenced =
      options.ifMatch === undefined
        ? options
        : { ...options, ifMatch: this.#physical(path, options.ifMatch) };
    return this.inner.writeFile(this.#inRelease(release, path), data, fenced);
  }

  async #fenced(path: string, ifMatch: string, signal?: AbortSignal): Promise<WriteResult> {
    const entry = await this.stat(path, { signal });
    if (entry.version !== ifMatch) {
      throw new StorageError({
        kind: "conflict",
        operation: "write file",
        backend: this.name,
        path,
        detail: `stored at version ${entry.version ?? "(none)"}, not ${ifMatch}`,
      });
    }
    return { version: ifMatch };
  }

  async deletePaths(
    prefix: string,
    paths: readonly string[],
    options: DeleteOptions = {},
  ): Promise<void> {
    if (!isWithinPrefix(this.bundlePath, prefix)) {
      return this.inner.deletePaths(prefix, paths, options);
    }
    const own: string[] = [];
    const outputs: string[] = [];
    for (const path of paths) {
      (this.#passes(joinPrefix(prefix, path)) ? own : outputs).push(path);
    }
    if (outputs.length > 0) {
      const release = await this.#writeRelease(options.signal);
      // Nothing of ours lies in a release that is kept and not being built: nothing to delete.
      if (release !== undefined) {
        const physical = this.#inRelease(release, prefix);
        const ifMatch = this.#ifMatchFor(options, outputs);
        if (ifMatch.ifMatch !== undefined) {
          ifMatch.ifMatch = new Map(
            [...ifMatch.ifMatch].map(([path, version]) => [
              path,
              this.#physical(joinPrefix(prefix, path), version),
            ]),
          );
        }
        await this.inner.deletePaths(physical, outputs, ifMatch);
      } else if (!options.ignoreMissing) {
        throw this.#notFound("delete managed outputs", joinPrefix(prefix, outputs[0] as string));
      }
    }
    if (own.length > 0) await this.inner.deletePaths(prefix, own, this.#ifMatchFor(options, own));
  }

  #ifMatchFor(options: DeleteOptions, paths: readonly string[]): DeleteOptions {
    if (options.ifMatch === undefined) return options;
    const wanted = new Set(paths);
    const ifMatch = new Map([...options.ifMatch].filter(([path]) => wanted.has(path)));
    return { ...options, ifMatch };
  }

  async deletePrefix(prefix: string, options: DeleteOptions = {}): Promise<void> {
    if (!isWithinPrefix(this.bundlePath, prefix)) return this.inner.deletePrefix(prefix, options);
    const release = await this.#writeRelease(options.signal);
    if (release === undefined) {
      if (options.ignoreMissing) return;
      throw this.#notFound("delete prefix", prefix);
    }
    // The bundle path's own files are not the release's: a cleared bundle path keeps them.
    const keep = options.keep?.filter((path) => !this.#passes(joinPrefix(prefix, path)));
    await this.inner.deletePrefix(this.#inRelease(release, prefix), {
      ...options,
      ignoreMissing: true,
      ...(keep === undefined ? {} : { keep }),
    });
  }

  async close(): Promise<void> {
    // The view does not own the backend it looks through.
  }
}
