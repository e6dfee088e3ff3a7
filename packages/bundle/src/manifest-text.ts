import { compareLogicalPaths, runSteps, type Steps } from "@distributor/storage";
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
  const files = (yield* isSortedSteps(manifest.files))
    ? manifest.files
    : [...manifest.files].sort((a, b) => compareLogicalPaths(a.path, b.path));
  const chunks = [manifestHead(manifest)];
  for (let start = 0; start < files.length; start += STEP_FILES) {
    const entries = files.slice(start, start + STEP_FILES).map(indentedFile);
    chunks.push(`${start === 0 ? "" : ","}${entries.join(",")}`);
    yield;
  }
  chunks.push(manifestTail(files));
  return chunks.join("");
}

/**
 * Whether `text` is exactly `serializeManifest(manifest)` for a manifest whose files are in
 * canonical order, compared piece by piece in steps of `STEP_FILES` files, without building that
 * text (over 100 MB at a million files).
 */
export function* isManifestTextSteps(manifest: Manifest, text: string): Steps<boolean> {
  let offset = 0;
  const next = (piece: string): boolean => {
    if (!text.startsWith(piece, offset)) return false;
    offset += piece.length;
    return true;
  };
  if (!next(manifestHead(manifest))) return false;
  const { files } = manifest;
  for (let index = 0; index < files.length; index++) {
    const file = files[index] as ManifestFile;
    if (!next(index === 0 ? indentedFile(file) : `,${indentedFile(file)}`)) return false;
    if (index % STEP_FILES === STEP_FILES - 1) yield;
  }
  return next(manifestTail(files)) && offset === text.length;
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
