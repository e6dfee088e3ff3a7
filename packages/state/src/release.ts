import { randomBytes } from "node:crypto";

/**
 * Which release of a destination bundle path a single-owner state's records describe, under the
 * release layout (`layout: releases`): the outputs live in `releases/<id>/` below the bundle path
 * and `current` links to the release in force. A distributor extension of the reference schema:
 * readers that do not know it ignore it, as unknown fields are.
 */
export interface ReleaseState {
  id: string;
}

/** A release id: its UTC creation time to the millisecond, then four random hex digits. */
export const RELEASE_ID_PATTERN = /^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9a-f]{4}$/;

/** A new release id for `now`; ids sort by the time they were made. */
export function newReleaseId(now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, "");
  return `${stamp}-${randomBytes(2).toString("hex")}`;
}

export function isReleaseId(text: string): boolean {
  return RELEASE_ID_PATTERN.test(text);
}

/** A state file's text, or its bytes as stored. */
export type StateText = string | Uint8Array;

/**
 * The part of a state's text from the first occurrence of `key` on, at most `width` characters,
 * found without decoding the rest (a state may be megabytes; decoding it costs more than the
 * search). Bytes are searched natively and the window read as Latin-1, which is exact for what the
 * peeks match: every character they look at is ASCII, and no byte of a UTF-8 sequence beyond ASCII
 * is ASCII, so each ASCII character stands where it is.
 */
function windowAt(text: StateText, key: string, width: number): string | undefined {
  if (typeof text === "string") {
    const at = text.indexOf(key);
    return at === -1 ? undefined : text.slice(at, at + width);
  }
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  const at = bytes.indexOf(key, 0, "latin1");
  return at === -1 ? undefined : bytes.toString("latin1", at, Math.min(bytes.length, at + width));
}

// The keys as this package writes them. Every string value (output paths, the embedded
// manifest's paths and ids) has its quotes escaped (`\"release\":`), so a quote, the name, a quote
// and a colon in a row is a member name; no member of the manifest or of an output record is
// named `release`, `replacing` or `pipeline_id`, so the first of each is the state's own (owners
// come before everything else; a shared-root state has no top-level `pipeline_id` nor `release`).
// `id` is the first member of `release`, whatever members a later version adds after it.
const RELEASE_MEMBER = /^"release":\s*\{\s*"id":\s*"([^"\\]*)"/;
const OWNER_MEMBERS = /^"pipeline_id":\s*"([^"\\]*)",\s*"destination_id":\s*"([^"\\]*)"/;

/**
 * The release a state file's text records, without parsing the document: what a release view
 * needs to know which release directory the records it reads describe. Undefined for a state
 * without one (any shared-root state). Only the id's shape is checked; the parser checks the
 * rest of the document wherever it is read.
 */
export function peekStateRelease(text: StateText): string | undefined {
  const window = windowAt(text, '"release":', 128);
  const match = window === undefined ? null : RELEASE_MEMBER.exec(window);
  if (match === null) return undefined;
  const id = match[1] as string;
  return isReleaseId(id) ? id : undefined;
}

/**
 * Whether a state file's text carries a replacement marker (`replacing`, at any level), without
 * parsing it.
 */
export function peekReplacementMarker(text: StateText): boolean {
  return windowAt(text, '"replacing":', 1) !== undefined;
}

/**
 * The owner a single-owner state file's text names (its first `pipeline_id` and
 * `destination_id`, which this package writes side by side before anything else), without
 * parsing it. Undefined when the text has no such pair.
 */
export function peekSingleOwner(
  text: StateText,
): { pipelineId: string; destinationId: string } | undefined {
  const window = windowAt(text, '"pipeline_id":', 512);
  const match = window === undefined ? null : OWNER_MEMBERS.exec(window);
  if (match === null) return undefined;
  return { pipelineId: match[1] as string, destinationId: match[2] as string };
}

// The embedded manifest's `digest` follows its `schema_version`, `id` and `created` (this package
// writes them in that order), and no member before it is named `digest`.
const SOURCE_DIGEST = /"digest":\s*"(sha256:[0-9a-f]{64})"/;

/**
 * The digest of the source a single-owner state's text records (its embedded manifest's
 * `digest`), from the beginning of the text, without parsing the document: what tells two
 * releases of one source apart from releases of two. Undefined when the text does not show one
 * within its first few kilobytes.
 */
export function peekSourceDigest(text: StateText): string | undefined {
  const window = windowAt(text, '"source":', 8192);
  const match = window === undefined ? null : SOURCE_DIGEST.exec(window);
  return match === null ? undefined : (match[1] as string);
}
