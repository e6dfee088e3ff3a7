import type { Manifest } from "@distributor/bundle";
import {
  MetadataRules,
  type OutputSelection,
  selectOutputs,
  withMetadata,
} from "@distributor/engine";
import {
  isSharedRootState,
  type OutputProjection,
  type OwnerScope,
  ownerOutputs,
  type StateDocument,
  sameOwnerScope,
  singleOwnerScope,
} from "@distributor/state";
import type { DestinationConfig } from "../config/types.js";

/**
 * The outputs `destination` publishes from `manifest` at `bundlePath` under its configuration:
 * copies and/or rendered HTML, each with the metadata of its first matching rule. Every command
 * that needs "what this source gives here" (run, adopt, prune, audit) asks this one function.
 */
export function destinationSelection(
  destination: DestinationConfig,
  manifest: Manifest,
  bundlePath: string,
): OutputSelection[] {
  const html = destination.publish.html && destination.transform.markdownToHtml.enabled;
  return withMetadata(
    selectOutputs(manifest, {
      source: destination.publish.source,
      html: destination.publish.html,
      markdownMode: html ? destination.transform.markdownToHtml.mode : undefined,
    }),
    new MetadataRules(destination.metadata),
    bundlePath,
  );
}

/** The source manifest `owner` records in `document`, when it records one there. */
export function recordedManifest(document: StateDocument, owner: OwnerScope): Manifest | undefined {
  if (isSharedRootState(document)) {
    return document.owners.find((o) => sameOwnerScope(o.scope, owner))?.source.manifest;
  }
  return sameOwnerScope(singleOwnerScope(document), owner) ? document.source.manifest : undefined;
}

/**
 * The paths of the publication in force for `owner` in `document`: what its recorded source gives
 * under the destination's configuration. Empty when the owner records nothing there; throws the
 * planner's error when the configuration cannot select outputs from that source.
 */
export function livePaths(
  destination: DestinationConfig,
  document: StateDocument,
  owner: OwnerScope,
  bundlePath: string,
): Set<string> {
  const manifest = recordedManifest(document, owner);
  if (manifest === undefined) return new Set();
  return new Set(destinationSelection(destination, manifest, bundlePath).map((o) => o.path));
}

/** The records of `owner` in a state, or undefined when the state is not (partly) its own. */
export function ownedRecords(
  document: StateDocument,
  owner: OwnerScope,
): ReadonlyArray<OutputProjection> | undefined {
  if (isSharedRootState(document)) {
    const records = ownerOutputs(document, owner);
    return document.owners.some((o) => sameOwnerScope(o.scope, owner)) ? records : undefined;
  }
  return sameOwnerScope(singleOwnerScope(document), owner) ? document.outputs : undefined;
}
