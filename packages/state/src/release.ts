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
 * Bytes read as Latin-1: a copy, not a UTF-8 decoding (ten times faster on a state of megabytes).
 * Exact for what the peeks look for: every character they match is ASCII, and the bytes of a
 * UTF-8 sequence beyond ASCII are never ASCII, so each ASCII character stands where it is.
 */
function asText(text: StateText): string {
  return typeof text === "string"
    ? text
    : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString("latin1");
}

// The key as this package writes it: `"release"`, optional whitespace, an object holding only
// `"id"`. Inside the embedded manifest (a JSON string) and output paths every quote is escaped,
// so an unescaped `"release":` is the top-level key and nothing else.
const RELEASE_MEMBER = /"release":\s*\{\s*"id":\s*"([^"\\]*)"\s*\}/;

/**
 * The release a state file's text records, without parsing the document: what a release view
 * needs to know which release directory the records it reads describe. Undefined for a state
 * without one (any shared-root state). Only the id's shape is checked; the parser checks the
 * rest of the document wherever it is read.
 */
export function peekStateRelease(text: StateText): string | undefined {
  const match = RELEASE_MEMBER.exec(asText(text));
  if (match === null) return undefined;
  const id = match[1] as string;
  return isReleaseId(id) ? id : undefined;
}

const MARKER_MEMBER = /"replacing":\s*\{/;
const OWNER_MEMBERS = /"pipeline_id":\s*"([^"\\]*)",\s*"destination_id":\s*"([^"\\]*)"/;

/**
 * Whether a state file's text carries a replacement marker (`replacing`, at any level), without
 * parsing it; the same escaping argument as `peekStateRelease` makes the match exact.
 */
export function peekReplacementMarker(text: StateText): boolean {
  return MARKER_MEMBER.test(asText(text));
}

/**
 * The owner a single-owner state file's text names (its first `pipeline_id` and
 * `destination_id`, which this package writes side by side before anything else), without
 * parsing it. Undefined when the text has no such pair.
 */
export function peekSingleOwner(
  text: StateText,
): { pipelineId: string; destinationId: string } | undefined {
  const match = OWNER_MEMBERS.exec(asText(text));
  if (match === null) return undefined;
  return { pipelineId: match[1] as string, destinationId: match[2] as string };
}
