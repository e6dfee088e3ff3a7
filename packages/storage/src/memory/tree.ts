import { parentPath } from "../paths.js";

export interface StoredFile {
  bytes: Buffer;
  modifiedAt: Date;
  /** Changes with every write of the path. */
  version: string;
  contentType?: string | undefined;
  cacheControl?: string | undefined;
  contentDisposition?: string | undefined;
  contentEncoding?: string | undefined;
}

/** What lies at a logical path in a memory tree. */
export type MemoryPathState =
  | { kind: "missing" }
  /** An ancestor (`at`) is a file, so nothing can exist at or below the path. */
  | { kind: "blocked"; at: string }
  | { kind: "file"; file: StoredFile }
  | { kind: "directory" };

/**
 * Files keyed by logical path. Directories are implied by the files below them, like S3 prefixes;
 * a count per directory keeps "is this a directory?" cheap and drops a directory with its last file.
 */
export class MemoryTree {
  readonly files = new Map<string, StoredFile>();
  readonly #filesBelow = new Map<string, number>();

  lookup(path: string): MemoryPathState {
    for (let ancestor = parentPath(path); ancestor !== ""; ancestor = parentPath(ancestor)) {
      if (this.files.has(ancestor)) return { kind: "blocked", at: ancestor };
    }
    const file = this.files.get(path);
    if (file) return { kind: "file", file };
    if (this.#filesBelow.has(path)) return { kind: "directory" };
    return { kind: "missing" };
  }

  isDirectory(path: string): boolean {
    return this.#filesBelow.has(path);
  }

  /** Stores a file; the caller has already checked that no ancestor is a file. */
  put(path: string, file: StoredFile): void {
    const isNew = !this.files.has(path);
    this.files.set(path, file);
    if (isNew) this.#countAncestors(path, 1);
  }

  remove(path: string): void {
    if (this.files.delete(path)) this.#countAncestors(path, -1);
  }

  clear(): void {
    this.files.clear();
    this.#filesBelow.clear();
  }

  #countAncestors(path: string, delta: number): void {
    for (let ancestor = parentPath(path); ancestor !== ""; ancestor = parentPath(ancestor)) {
      const count = (this.#filesBelow.get(ancestor) ?? 0) + delta;
      if (count === 0) this.#filesBelow.delete(ancestor);
      else this.#filesBelow.set(ancestor, count);
    }
  }
}
