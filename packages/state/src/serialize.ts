import { embeddedManifestJson } from "./embedded-manifest.js";
import { formatStateTimestamp } from "./time.js";
import {
  isSharedRootState,
  type LinkState,
  type OutputRecord,
  type OwnerRecord,
  type SharedRootOutputRecord,
  type SharedRootState,
  type SingleOwnerState,
  type StateDocument,
} from "./types.js";
import { validateSharedRootState, validateSingleOwnerState } from "./validate.js";

/**
 * Serialises single-owner state as `.distributor.json` text: schema 2, keys in the documented
 * order, 2-space indent, trailing newline, UTC second-precision timestamps, optional fields
 * omitted when empty. Invalid state is refused with a `StateError` rather than written.
 */
export function serializeSingleOwnerState(state: SingleOwnerState): string {
  validateSingleOwnerState(state);
  const document: Record<string, unknown> = { schema_version: state.schemaVersion };
  if (state.distributorVersion) document.distributor_version = state.distributorVersion;
  Object.assign(document, {
    pipeline_id: state.pipelineId,
    destination_id: state.destinationId,
    published_at: formatStateTimestamp(state.publishedAt),
    created_at: formatStateTimestamp(state.createdAt),
    updated_at: formatStateTimestamp(state.updatedAt),
    state: { mode: state.state.mode },
    reconciliation: { mode: state.reconciliation.mode },
    source: { manifest: embeddedManifestJson(state.source.manifest) },
  });
  const links = linksJson(state.links);
  if (links !== undefined) document.links = links;
  document.outputs = state.outputs.map((output) => ({
    ...outputJson(output),
    created_at: formatStateTimestamp(output.createdAt),
    updated_at: formatStateTimestamp(output.updatedAt),
  }));
  return text(document);
}

/** Serialises shared-root state (schema 3) with the same conventions. */
export function serializeSharedRootState(state: SharedRootState): string {
  validateSharedRootState(state);
  const document: Record<string, unknown> = { schema_version: state.schemaVersion };
  if (state.distributorVersion) document.distributor_version = state.distributorVersion;
  Object.assign(document, {
    created_at: formatStateTimestamp(state.createdAt),
    updated_at: formatStateTimestamp(state.updatedAt),
    state: { mode: state.state.mode },
    owners: state.owners.map(ownerJson),
    outputs: state.outputs.map(sharedRootOutputJson),
  });
  return text(document);
}

/** Serialises either kind of document according to its schema. */
export function serializeDocument(document: StateDocument): string {
  return isSharedRootState(document)
    ? serializeSharedRootState(document)
    : serializeSingleOwnerState(document);
}

function ownerJson(owner: OwnerRecord): Record<string, unknown> {
  const json: Record<string, unknown> = {
    pipeline_id: owner.scope.pipelineId,
    destination_id: owner.scope.destinationId,
    reconciliation: { mode: owner.reconciliation.mode },
    source: { manifest: embeddedManifestJson(owner.source.manifest) },
  };
  const links = linksJson(owner.links);
  if (links !== undefined) json.links = links;
  return json;
}

function sharedRootOutputJson(output: SharedRootOutputRecord): Record<string, unknown> {
  return {
    ...outputJson(output),
    pipeline_id: output.owner.pipelineId,
    destination_id: output.owner.destinationId,
    source_id: output.sourceId,
    source_digest: output.sourceDigest,
    source_created: formatStateTimestamp(output.sourceCreated),
    created_at: formatStateTimestamp(output.createdAt),
    updated_at: formatStateTimestamp(output.updatedAt),
  };
}

/** The fields both schemas share, up to `size`; timestamps follow per schema. */
function outputJson(output: OutputRecord): Record<string, unknown> {
  const json: Record<string, unknown> = {
    path: output.path,
    kind: output.kind,
    source_path: output.sourcePath,
  };
  if (output.transform) json.transform = output.transform;
  if (output.url) json.url = output.url;
  json.sha256 = output.sha256;
  json.size = output.size;
  return json;
}

function linksJson(links: LinkState | undefined): Record<string, unknown> | undefined {
  return links?.primaryUrl ? { primary_url: links.primaryUrl } : undefined;
}

function text(document: Record<string, unknown>): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}
