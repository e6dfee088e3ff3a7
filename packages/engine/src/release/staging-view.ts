import type { Readable } from "node:stream";
import {
  type ByteReader,
  type DeleteOptions,
  isStorageError,
  joinPrefix,
  type OperationOptions,
  type ReadOptions,
  type StorageBackend,
  type StorageEntry,
  StorageError,
  statePath,
  type VersionedFile,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import type { DestinationLimits } from "../protocol/limits.js";
import { stagingStatePath } from "./layout.js";
import { ReleaseView } from "./view.js";

/**
 * A release view whose publication is staged (docs/design/releases.md, staged releases): the
 * release is built exactly as `ReleaseView` builds one, but every state write of the run goes to
 * `releases/<next>.staging.json` instead of the live state. The live state and `current` keep
 * describing the live release whatever happens to the run; what the run committed becomes the
 * staged release's snapshot (see `commitStaged`).
 *
 * Until the run first writes its state, reads of the state are the live state's (the plan is made
 * against the live release), and so are the writes of a recovery made while taking the lease,
 * before the release is prepared. The run's first state write once it is prepared is a compare-and-swap against the live state's
 * version — the one planning read — that creates the staging state without touching the live
 * one. From then on the run's state is the staging state alone.
 */
export class StagingView extends ReleaseView {
  /** Set once the run's first state write has gone to the staging state. */
  #staging = false;

  constructor(inner: StorageBackend, bundlePath: string, next: string, limits?: DestinationLimits) {
    super(inner, bundlePath, next, limits);
  }

  /** Where this run's state lies once it first wrote it. */
  get stagingPath(): string {
    return stagingStatePath(this.bundlePath, this.next as string);
  }

  #isState(path: string): boolean {
    return this.#staging && path === statePath(this.bundlePath);
  }

  override async readVersioned(path: string, options: ReadOptions = {}): Promise<VersionedFile> {
    if (!this.#isState(path)) return super.readVersioned(path, options);
    const read = await this.inner.readVersioned(this.stagingPath, options);
    this.observeState(read.bytes);
    return read;
  }

  override async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    if (!this.#isState(path)) return super.openRead(path, options);
    return this.inner.openRead(this.stagingPath, options);
  }

  override get openReader():
    | ((path: string, options?: OperationOptions) => Promise<ByteReader>)
    | undefined {
    const open = super.openReader;
    if (open === undefined) return undefined;
    return async (path, options = {}) =>
      this.#isState(path)
        ? (this.inner.openReader as NonNullable<StorageBackend["openReader"]>)(
            this.stagingPath,
            options,
          )
        : open(path, options);
  }

  override async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    if (!this.#isState(path)) return super.stat(path, options);
    return { ...(await this.inner.stat(this.stagingPath, options)), path };
  }

  override async writeFile(
    path: string,
    data: WriteData,
    options: WriteOptions = {},
  ): Promise<WriteResult> {
    // Before the release is prepared, a state write is a recovery's (taking the lease finishes
    // what a dead run left in the live state): it is the live state's.
    if (path !== statePath(this.bundlePath) || !this.prepared) {
      return super.writeFile(path, data, options);
    }
    if (!this.#staging) {
      // The first state write of the run: it stands only over the live state planning read.
      await this.#assertLiveUnchanged(path, options);
      this.#staging = true;
      const { ifMatch: _planned, ...create } = options;
      const written = await this.inner.writeFile(this.stagingPath, data, {
        ...create,
        overwrite: false,
      });
      this.#observeWritten(data);
      return written;
    }
    const written = await this.inner.writeFile(this.stagingPath, data, options);
    this.#observeWritten(data);
    return written;
  }

  #observeWritten(data: WriteData): void {
    if (data instanceof Uint8Array || typeof data === "string") this.observeState(data);
  }

  async #assertLiveUnchanged(path: string, options: WriteOptions): Promise<void> {
    let version: string | undefined;
    try {
      version = (await this.inner.stat(path, { signal: options.signal })).version;
    } catch (error) {
      if (!isStorageError(error, "not_found")) throw error;
    }
    const expected = options.ifMatch;
    const unchanged = expected === undefined ? version === undefined : version === expected;
    if (unchanged) return;
    throw new StorageError({
      kind: expected === undefined ? "already_exists" : "conflict",
      operation: "write file",
      backend: this.name,
      path,
      detail: `the live state is at version ${version ?? "(none)"}, not the one this staged run planned from`,
    });
  }

  override async deletePaths(
    prefix: string,
    paths: readonly string[],
    options: DeleteOptions = {},
  ): Promise<void> {
    // The live state is never deleted by a staged run.
    const state = statePath(this.bundlePath);
    const kept = paths.filter((path) => joinPrefix(prefix, path) !== state);
    if (kept.length > 0) await super.deletePaths(prefix, kept, options);
  }
}
