import { createHash } from "node:crypto";
import { compareLogicalPaths, runSteps, type Steps } from "@distributor/storage";
import type { ReadyPieces } from "./json-slices.js";
import { isSortedSteps, STEP_FILES } from "./manifest-order.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { formatTimestamp } from "./timestamp.js";

// A manifest's canonical text: what `manifest.json` holds and what its digest and signature cover.

/**
 * Serialises a manifest as the canonical `manifest.json`: 2-space indent, trailing newline, files
 * in byte order, `created` in UTC (see `formatTimestamp`).
 */
export function serializeManifest(manifest: Manifest): string {
  return runSteps(serializeManifestSteps(manifest));
}

/**
 * `serializeManifest` in steps of `STEP_FILES` files: the text `JSON.stringify` gives the
 * canonical document with a 2-space indent, written file by file (a million-file manifest is over
 * 100 MB of text).
 */
export function* serializeManifestSteps(manifest: Manifest): Steps<string> {
  const chunks: string[] = [];
  yield* canonicalChunksSteps(manifest, (chunk) => chunks.push(chunk));
  return chunks.join("");
}

/**
 * The SHA-256 (hex) of the UTF-8 bytes of `serializeManifest(manifest)`, computed a few files at a
 * time, without the text: whether a manifest file of a million files is canonical is a comparison
 * of its digest with this one.
 */
export function* canonicalTextDigestSteps(manifest: Manifest): Steps<string> {
  const hash = createHash("sha256");
  yield* canonicalChunksSteps(manifest, (chunk) => hash.update(chunk, "utf8"));
  return hash.digest("hex");
}

/** The canonical text in chunks of `STEP_FILES` files, each given to `take`, a step each. */
function* canonicalChunksSteps(manifest: Manifest, take: (chunk: string) => void): Steps<void> {
  const files = (yield* isSortedSteps(manifest.files))
    ? manifest.files
    : [...manifest.files].sort((a, b) => compareLogicalPaths(a.path, b.path));
  take(manifestHead(manifest));
  for (let start = 0; start < files.length; start += STEP_FILES) {
    const entries = files.slice(start, start + STEP_FILES).map(indentedFile);
    take(`${start === 0 ? "" : ","}${entries.join(",")}`);
    yield;
  }
  take(manifestTail(files));
}

/**
 * Whether `text` is exactly `serializeManifest(manifest)` for a manifest whose files are in
 * canonical order, compared piece by piece in steps of `STEP_FILES` files, without building that
 * text (over 100 MB at a million files).
 */
export function* isManifestTextSteps(manifest: Manifest, text: string): Steps<boolean> {
  let offset = 0;
  return yield* isCanonicalSteps(manifest, {
    consume(piece) {
      if (!text.startsWith(piece, offset)) return false;
      offset += piece.length;
      return true;
    },
    atEnd: () => offset === text.length,
  });
}

/** `isManifestTextSteps` for a text given in pieces, read once from its first piece. */
export function* isManifestPiecesSteps(manifest: Manifest, pieces: ReadyPieces): Steps<boolean> {
  return yield* isCanonicalSteps(manifest, new PieceCursor(pieces));
}

/** A text read from its start: each expected part is consumed if the text continues with it. */
interface TextCursor {
  consume(expected: string): boolean;
  atEnd(): boolean;
}

function* isCanonicalSteps(manifest: Manifest, text: TextCursor): Steps<boolean> {
  if (!text.consume(manifestHead(manifest))) return false;
  const { files } = manifest;
  for (let index = 0; index < files.length; index++) {
    const file = files[index] as ManifestFile;
    if (!text.consume(index === 0 ? indentedFile(file) : `,${indentedFile(file)}`)) return false;
    if (index % STEP_FILES === STEP_FILES - 1) yield;
  }
  return text.consume(manifestTail(files)) && text.atEnd();
}

class PieceCursor implements TextCursor {
  #piece = "";
  #offset = 0;

  constructor(private readonly pieces: ReadyPieces) {}

  consume(expected: string): boolean {
    // Usually within the current piece; otherwise compared part by part across pieces.
    if (this.#piece.startsWith(expected, this.#offset)) {
      this.#offset += expected.length;
      return true;
    }
    for (let at = 0; at < expected.length; ) {
      if (!this.#load()) return false;
      const length = Math.min(expected.length - at, this.#piece.length - this.#offset);
      if (!this.#piece.startsWith(expected.slice(at, at + length), this.#offset)) return false;
      at += length;
      this.#offset += length;
    }
    return true;
  }

  atEnd(): boolean {
    return !this.#load();
  }

  /** Makes sure some text is left to read; false at the end of the text. */
  #load(): boolean {
    while (this.#offset >= this.#piece.length) {
      const next = this.pieces.next();
      if (next === undefined) return false;
      this.#piece = next;
      this.#offset = 0;
    }
    return true;
  }
}

/** The canonical text up to the first file: `JSON.stringify`'s, with `files` opened last. */
function manifestHead(manifest: Manifest): string {
  const head = JSON.stringify(
    {
      schema_version: manifest.schemaVersion,
      id: manifest.id,
      created: formatTimestamp(manifest.created),
      digest: manifest.digest,
    },
    null,
    2,
  );
  // The head without its closing brace, then the files as `JSON.stringify` indents them there.
  return `${head.slice(0, -2)},\n  "files": [`;
}

function manifestTail(files: readonly ManifestFile[]): string {
  return files.length === 0 ? "]\n}\n" : "\n  ]\n}\n";
}

/** One element of the canonical `files` array, with the line break and indent before it. */
function indentedFile(file: ManifestFile): string {
  const { path, sha256, size } = file;
  if (typeof path === "string" && typeof sha256 === "string" && typeof size === "number") {
    return `\n    {\n      "path": ${JSON.stringify(path)},\n      "sha256": ${JSON.stringify(sha256)},\n      "size": ${JSON.stringify(size)}\n    }`;
  }
  // An in-memory manifest of other types (never a valid one): exactly as JSON.stringify nests it.
  return `\n    ${JSON.stringify({ path, sha256, size }, null, 2).replaceAll("\n", "\n    ")}`;
}
