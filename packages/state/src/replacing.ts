import { sameOwnerScope } from "./scope.js";
import {
  isSharedRootState,
  type OwnerScope,
  type ReplacementMarker,
  type StateDocument,
} from "./types.js";

/**
 * The `replacing` marker that covers `owner`'s records: the document's own for single-owner
 * state (whoever the owner), the owner's entry for a shared root. Undefined when none is set.
 */
export function replacementMarker(
  document: StateDocument,
  owner: OwnerScope,
): ReplacementMarker | undefined {
  if (!isSharedRootState(document)) return document.replacing;
  return document.owners.find((entry) => sameOwnerScope(entry.scope, owner))?.replacing;
}

/** Every `replacing` marker of the document, with the owner it covers (single-owner: none). */
export function replacementMarkers(
  document: StateDocument,
): { owner: OwnerScope | undefined; marker: ReplacementMarker }[] {
  if (!isSharedRootState(document)) {
    return document.replacing === undefined
      ? []
      : [{ owner: undefined, marker: document.replacing }];
  }
  return document.owners.flatMap((entry) =>
    entry.replacing === undefined ? [] : [{ owner: entry.scope, marker: entry.replacing }],
  );
}

/**
 * The document with `owner`'s marker set to `marker` (single-owner: the document's). A shared
 * root without an entry for `owner` gets none: its first publication there replaces nothing.
 */
export function withReplacementMarker(
  document: StateDocument,
  owner: OwnerScope,
  marker: ReplacementMarker,
): StateDocument {
  if (!isSharedRootState(document)) return { ...document, replacing: marker };
  return {
    ...document,
    owners: document.owners.map((entry) =>
      sameOwnerScope(entry.scope, owner) ? { ...entry, replacing: marker } : entry,
    ),
  };
}

/** The document without any `replacing` marker (what recovery writes back). */
export function withoutReplacementMarkers(document: StateDocument): StateDocument {
  if (!isSharedRootState(document)) {
    if (document.replacing === undefined) return document;
    const { replacing: _, ...rest } = document;
    return rest;
  }
  if (document.owners.every((entry) => entry.replacing === undefined)) return document;
  return {
    ...document,
    owners: document.owners.map(({ replacing: _, ...entry }) => entry),
  };
}
