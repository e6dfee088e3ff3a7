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
export function peekStateRelease(text: string): string | undefined {
  const match = RELEASE_MEMBER.exec(text);
  if (match === null) return undefined;
  const id = match[1] as string;
  return isReleaseId(id) ? id : undefined;
}
