import { createHash } from "node:crypto";
import { runSteps, type Steps } from "@distributor/storage";
import { decoded } from "./decoded-json.js";
import {
  type PiecedJson,
  parseJsonPiecesSteps,
  parseJsonSteps,
  parseStrictJsonSteps,
  type ReadyPieces,
  type TextPieces,
} from "./json-slices.js";
import {
  Context,
  checkFields,
  checkFile,
  checkManifestSteps,
  decodedFile,
  MANIFEST_SCHEMA_VERSION,
  parseFile,
  requireString,
  show,
} from "./manifest-checks.js";
import { STEP_FILES } from "./manifest-order.js";
import {
  canonicalTextDigestSteps,
  isManifestPiecesSteps,
  isManifestTextSteps,
  serializeManifest,
} from "./manifest-text.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { JsonNumber, JsonSyntaxError, type JsonValue } from "./strict-json.js";
import { parseTimestamp } from "./timestamp.js";
import { WholeTextNeeded } from "./utf8-pieces.js";

const MANIFEST_FIELDS = ["schema_version", "id", "created", "digest", "files"] as const;

/**
 * Parses and validates `manifest.json` text (docs/design/bundles.md). Every failure is a `ManifestError` naming
 * the field; `source` (e.g. `reports/manifest.json`) prefixes the message. Files come back sorted
 * by path in byte order.
 */
export function parseManifest(text: string, source?: string): Manifest {
  return remember(readManifestText(text, source));
}

/**
 * `parseManifest`, returning the manifest frozen (its file list and every file too): one that
 * stays exactly as parsed, so it is known valid without the canonical text's digest that
 * `parseManifest` computes to notice later changes (about 0.2 s at 10⁵ files). For manifests
 * held read-only, such as those embedded in a destination's state.
 */
export function parseFrozenManifest(text: string, source?: string): Manifest {
  return runSteps(parseFrozenManifestSteps(text, source));
}

/**
 * `parseFrozenManifest` as steps that pause every few thousand characters of the text and every
 * `STEP_FILES` files, for a caller that lets its event loop turn meanwhile (`runInSlices`).
 */
export function* parseFrozenManifestSteps(text: string, source?: string): Steps<Manifest> {
  return freeze(yield* readManifestTextSteps(text, source));
}

/**
 * A manifest already decoded by `JSON.parse` (as a state embeds it), checked under the same rules
 * and returned frozen, as `parseFrozenManifest` would return it for `JSON.stringify(value)`. As
 * steps that pause every `STEP_FILES` files, so that a caller may let its event loop turn while
 * a million-file manifest is checked. Paths and digests equal to `shared`'s at the same index are
 * taken from it, so a state's copy of the source manifest holds no strings of its own.
 */
export function* frozenManifestFromJsonSteps(
  value: unknown,
  source?: string,
  shared?: Manifest,
): Steps<Manifest> {
  // Entries that are the shared manifest's own (the reader kept them, `sharedManifestFile`) were
  // checked with it when it was parsed: a copy made of them all is that valid list of files, and
  // its digest is the shared one's, with nothing to check or hash again (seconds at 10⁶ files).
  const known = shared !== undefined && isFrozenManifest(shared) ? shared : undefined;
  let copied = known !== undefined;
  const read = (context: Context, entry: unknown, index: number) => {
    const file = shared?.files[index];
    if (copied && entry === file && file !== undefined) return file;
    copied = false;
    return decodedFile(context, entry, index, file);
  };
  const knownDigest = (files: readonly ManifestFile[]) =>
    copied && files.length === known?.files.length ? known.digest : undefined;
  const document = decoded(value);
  return freeze(yield* readManifestDocumentSteps(new Context(source), document, read, knownDigest));
}

/**
 * Whether `manifest` came from `parseFrozenManifest` or `frozenManifestFromJsonSteps` and is
 * unchanged since (its `created` included): valid, and its files in canonical order.
 */
export function isFrozenManifest(manifest: Manifest): boolean {
  const created = frozen.get(manifest);
  return created !== undefined && manifest.created.getTime() === created;
}

function freeze(manifest: Manifest): Manifest {
  for (const file of manifest.files) Object.freeze(file);
  Object.freeze(manifest.files);
  Object.freeze(manifest);
  frozen.set(manifest, manifest.created.getTime());
  return manifest;
}

function readManifestText(text: string, source: string | undefined): Manifest {
  return runSteps(readManifestTextSteps(text, source));
}

function* readManifestTextSteps(text: string, source: string | undefined): Steps<Manifest> {
  const canonical = yield* canonicalManifestSteps(text, source);
  return canonical ?? (yield* strictManifestSteps(text, source));
}

/**
 * `parseFrozenManifestSteps` for a text given in pieces (`utf8Pieces`): a canonical text is read
 * twice from its pieces (parsed, then compared), and never held whole; any other text is read
 * whole for the strict parser's verdict. The files are the entries as `JSON.parse` decoded them.
 */
export function* parseFrozenManifestPiecesSteps(
  text: PiecedJson & { restart(): ReadyPieces },
  source?: string,
): Steps<Manifest> {
  let canonical: Manifest | undefined;
  try {
    const value = yield* parseJsonPiecesSteps({ pieces: text.restart(), whole: text.whole });
    const read = (context: Context, entry: unknown, index: number) =>
      decodedFile(context, entry, index, entry as ManifestFile);
    const manifest = yield* readManifestDocumentSteps(new Context(source), decoded(value), read);
    if (yield* isManifestPiecesSteps(manifest, text.restart())) canonical = manifest;
  } catch {
    // Not canonical: the strict parser reads it again for its verdict and message.
  }
  return freeze(canonical ?? (yield* strictManifestSteps(text.whole(), source)));
}

/**
 * The manifest a canonical text read in pieces holds, frozen; undefined for any other text or
 * any problem, which the caller reads whole for the strict parser's verdict and message. The
 * pieces are read once: the text is canonical when `textDigest()`, the SHA-256 of every byte read
 * (asked for once the parse has read them all), is the digest of the canonical text of what was
 * read. The files are the entries as `JSON.parse` decoded them.
 */
export function* canonicalManifestPiecesSteps(
  pieces: TextPieces,
  source: string | undefined,
  textDigest: () => string,
): Steps<Manifest | undefined> {
  try {
    const whole = () => {
      throw new WholeTextNeeded();
    };
    const value = yield* parseJsonPiecesSteps({ pieces, whole });
    const read = (context: Context, entry: unknown, index: number) =>
      decodedFile(context, entry, index, entry as ManifestFile);
    const manifest = yield* readManifestDocumentSteps(new Context(source), decoded(value), read);
    const digest = textDigest();
    return (yield* canonicalTextDigestSteps(manifest)) === digest ? freeze(manifest) : undefined;
  } catch {
    return undefined;
  }
}

function* strictManifestSteps(text: string, source: string | undefined): Steps<Manifest> {
  const context: Context = new Context(source);
  let document: JsonValue;
  try {
    document = yield* parseStrictJsonSteps(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) context.fail(undefined, error.message, error);
    throw error;
  }
  return yield* readManifestDocumentSteps(context, document, (context, entry, index) =>
    parseFile(context, entry as JsonValue, index),
  );
}

/**
 * A canonical text (what `manifest create` writes) read with `JSON.parse` in slices: the manifest
 * the strict parser gives, in a fraction of its time and memory. That the text is exactly the
 * canonical text of what was read proves it has no duplicate key and its numbers are integers as
 * written; undefined for any other text or any problem, which the strict parser reads again for
 * its verdict and message.
 */
function* canonicalManifestSteps(text: string, source?: string): Steps<Manifest | undefined> {
  try {
    const value = yield* parseJsonSteps(text);
    const document = decoded(value);
    const manifest = yield* readManifestDocumentSteps(new Context(source), document, decodedFile);
    return (yield* isManifestTextSteps(manifest, text)) ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks a decoded manifest document. `files` entries pass through `entryValue` first, so that a
 * document decoded by `JSON.parse` is converted one entry at a time.
 */
function* readManifestDocumentSteps(
  context: Context,
  document: JsonValue,
  readFile: (context: Context, entry: unknown, index: number) => ManifestFile,
  knownDigest?: (files: readonly ManifestFile[]) => string | undefined,
): Steps<Manifest> {
  if (!(document instanceof Map)) context.fail(undefined, "manifest must be a JSON object");
  checkFields(context, document, MANIFEST_FIELDS, "");

  const version = document.get("schema_version");
  if (!(version instanceof JsonNumber) || version.text !== String(MANIFEST_SCHEMA_VERSION)) {
    context.fail("schema_version", `schema_version must be 1, got ${show(version)}`);
  }
  const id = requireString(context, document, "id");
  const createdText = requireString(context, document, "created");
  const parsed = parseTimestamp(createdText);
  if (!parsed.ok) {
    context.fail(
      "created",
      `created must be an RFC 3339 timestamp with an offset (e.g. 2026-06-04T11:55:00Z), got ${show(createdText)}: ${parsed.problem}`,
    );
  }
  const digest = requireString(context, document, "digest");
  const files = document.get("files");
  if (!Array.isArray(files)) context.fail("files", `files must be an array, got ${show(files)}`);
  const manifestFiles: ManifestFile[] = [];
  for (const [index, entry] of files.entries()) {
    manifestFiles.push(readFile(context, entry, index));
    if (index % STEP_FILES === STEP_FILES - 1) yield;
  }
  const parts = { id, created: parsed.date, digest, files: manifestFiles };
  return yield* checkManifestSteps(context, parts, knownDigest?.(manifestFiles));
}

export interface ManifestDraft {
  id: string;
  created: Date;
  files: readonly ManifestFile[];
}

/**
 * Builds a manifest from its parts, computing the bundle digest. Applies the same rules as
 * `parseManifest` and throws `ManifestError` for the same problems.
 */
export function buildManifest(draft: ManifestDraft): Manifest {
  return runSteps(buildManifestSteps(draft));
}

/** `buildManifest` as steps that pause every `STEP_FILES` files. */
export function* buildManifestSteps(draft: ManifestDraft): Steps<Manifest> {
  const context: Context = new Context(undefined);
  const files: ManifestFile[] = [];
  for (const [index, file] of draft.files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    const copy = { path: file.path, sha256: file.sha256, size: file.size };
    checkFile(context, copy, index);
    files.push(copy);
  }
  return yield* checkManifestSteps(context, {
    id: draft.id,
    created: draft.created,
    digest: undefined,
    files,
  });
}

/**
 * Manifests `parseManifest` returned, with the SHA-256 of their canonical text at that moment:
 * parsed from JSON, every value has the type the rules expect, so that text is valid and reads
 * back. (`buildManifest` takes in-memory values, which are not remembered.) Manifests are plain
 * mutable objects, so what is remembered is the text, not the object: see `verifiedManifestText`.
 */
const produced = new WeakMap<Manifest, string>();

/**
 * Manifests `parseFrozenManifest` returned, with the instant they were created at: frozen, so
 * still as parsed, save for `created` (a `Date` cannot be frozen), which is compared.
 */
const frozen = new WeakMap<Manifest, number>();

function remember(manifest: Manifest): Manifest {
  produced.set(manifest, textDigest(serializeManifest(manifest)));
  return manifest;
}

/**
 * The canonical text of `manifest` (`serializeManifest`) when it is known to be valid without
 * parsing it again: it came from `parseManifest` and still serialises exactly as it did then, so
 * its text is one that was valid, and a valid manifest's text always parses (the round trip is
 * property-tested). Undefined otherwise (the caller checks it), including for changes that alter
 * the text; changes that do not (the order of `files` in memory) do not matter to validity.
 * State validation uses it to skip re-reading the embedded manifest of a state it just parsed.
 */
export function verifiedManifestText(manifest: Manifest): string | undefined {
  const created = frozen.get(manifest);
  if (created !== undefined) {
    return manifest.created.getTime() === created ? serializeManifest(manifest) : undefined;
  }
  const digest = produced.get(manifest);
  if (digest === undefined) return undefined;
  let text: string;
  try {
    text = serializeManifest(manifest);
  } catch {
    // Changed into something that cannot even be written (an invalid `created`).
    return undefined;
  }
  return textDigest(text) === digest ? text : undefined;
}

function textDigest(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}
