import type { Readable } from "node:stream";
import {
  type ByteReader,
  type OperationOptions,
  type ReadOptions,
  type StorageBackend,
  type StorageEntry,
  statePath,
  type VersionedFile,
} from "@distributor/storage";
import type { DestinationLimits } from "../protocol/limits.js";
import { snapshotPath } from "./layout.js";
import { ReleaseView } from "./view.js";

/**
 * A release view, for reading only, whose state is a staged release's snapshot
 * (`releases/<id>.json`) and whose outputs are that release's files: planning a source through it
 * says whether the staged release is what a run of that source, under the configuration in
 * force, would publish (`skip_same`) — not only the same source.
 */
export class StagedStateView extends ReleaseView {
  constructor(
    inner: StorageBackend,
    bundlePath: string,
    readonly staged: string,
    limits?: DestinationLimits,
  ) {
    super(inner, bundlePath, undefined, limits);
  }

  #path(path: string): string {
    return path === statePath(this.bundlePath) ? snapshotPath(this.bundlePath, this.staged) : path;
  }

  override async readVersioned(path: string, options: ReadOptions = {}): Promise<VersionedFile> {
    if (path !== statePath(this.bundlePath)) return super.readVersioned(path, options);
    const read = await this.inner.readVersioned(this.#path(path), options);
    this.observeState(read.bytes);
    return read;
  }

  /** The staged release: what its snapshot records (`commitStaged` wrote it so). */
  override async stateRelease(_signal?: AbortSignal): Promise<string | undefined> {
    return this.staged;
  }

  override async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    if (path !== statePath(this.bundlePath)) return super.openRead(path, options);
    return this.inner.openRead(this.#path(path), options);
  }

  override get openReader():
    | ((path: string, options?: OperationOptions) => Promise<ByteReader>)
    | undefined {
    const open = super.openReader;
    if (open === undefined) return undefined;
    return async (path, options = {}) =>
      path === statePath(this.bundlePath)
        ? (this.inner.openReader as NonNullable<StorageBackend["openReader"]>)(
            this.#path(path),
            options,
          )
        : open(path, options);
  }

  override async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    if (path !== statePath(this.bundlePath)) return super.stat(path, options);
    return { ...(await this.inner.stat(this.#path(path), options)), path };
  }
}
