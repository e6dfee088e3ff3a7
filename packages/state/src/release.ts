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
