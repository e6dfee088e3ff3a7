// One bundle path of an audit: every managed output of the owner hashed and compared with its
// record, the publication the recorded source gives compared with the records, and what no record
// manages (see audit.ts for the whole command).
import {
  completenessGaps,
  type DestinationLimits,
  readStateFile,
  type StoredFile,
  storedFile,
  storedStatus,
} from "@distributor/engine";
import {
  isSharedRootState,
  type OutputMetadata,
  type OwnerScope,
  replacementMarker,
  type StateDocument,
  sameOwnerScope,
} from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  isWithinPrefix,
  joinPrefix,
  mapBounded,
  STATE_FILE_NAME,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import type { DestinationConfig } from "../config/types.js";
import { errorCode, errorMessage, WorkflowError } from "../errors.js";
import { destinationSelection, ownedRecords, recordedManifest } from "../shared/selection.js";
import type {
  AuditBundleReport,
  AuditDestinationReport,
  AuditIncompleteReport,
  AuditOptions,
  AuditOutputReport,
} from "./audit-types.js";
import type { ReconcileStateEntry } from "./unmanaged-entry.js";
import { isUnmanagedEntry, unmanagedEntryReport } from "./unmanaged-entry.js";

/** Files hashed at once by default: one read chunk in memory each. */
const DEFAULT_AUDIT_CONCURRENCY = 4;

export async function auditBundle(
  options: AuditOptions,
  backend: StorageBackend,
  destination: AuditDestinationReport,
  owner: OwnerScope,
  bundlePath: string,
  listing: {
    entries: readonly StorageEntry[];
    bundlePaths: readonly string[];
    destination: DestinationConfig;
    limits: DestinationLimits;
  },
): Promise<AuditBundleReport | undefined> {
  const stateFile = joinPrefix(bundlePath, STATE_FILE_NAME);
  const report: AuditBundleReport = {
    bundle_path: displayPath(bundlePath),
    state_file: stateFile,
    state: "valid",
    error: null,
    checked_count: 0,
    ok_count: 0,
    missing_count: 0,
    changed_count: 0,
    outputs: [],
    unmanaged_entries: [],
    incomplete: [],
    incomplete_count: 0,
    signer: null,
    interrupted: false,
    release: null,
  };
  let document: StateDocument;
  try {
    ({ document } = await readStateFile(
      backend,
      stateFile,
      options.signal,
      listing.limits.stateBytes,
    ));
  } catch (error) {
    if (errorCode(error) !== "state_invalid" && errorCode(error) !== "storage_limit_exceeded") {
      throw error;
    }
    report.state = "invalid";
    report.error = errorMessage(error);
    report.unmanaged_entries = unmanagedBelow(bundlePath, new Set(), listing);
    return report;
  }
  const records = ownedRecords(document, owner);
  if (records === undefined) {
    // Under `path_mapping: fixed` the root state is this owner's or nothing is: another
    // pipeline's there means this destination publishes nowhere of its own.
    if (listing.destination.pathMapping.mode === "fixed" && !isSharedRootState(document)) {
      throw new WorkflowError(
        "not_owner",
        `${stateFile} is the state of pipeline ${document.pipelineId} destination ${document.destinationId}, not of this pipeline and destination: the two share one path; give one of them another path`,
      );
    }
    return undefined;
  }
  report.interrupted = replacementMarker(document, owner) !== undefined;
  const source = isSharedRootState(document)
    ? document.owners.find((candidate) => sameOwnerScope(candidate.scope, owner))?.source
    : document.source;
  if (source?.signer !== undefined) {
    report.signer = { principal: source.signer.principal, fingerprint: source.signer.fingerprint };
  }
  report.incomplete = incompleteOutputs(listing.destination, document, owner, bundlePath);
  report.incomplete_count = report.incomplete.length;
  const sorted = [...records].sort((a, b) => compareLogicalPaths(a.path, b.path));
  options.onEvent?.({
    type: "bundle_start",
    pipeline_id: destination.pipeline_id,
    destination_id: destination.destination_id,
    bundle_path: bundlePath,
    outputs: sorted.length,
    bytes: sorted.reduce((sum, record) => sum + record.size, 0),
  });
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_AUDIT_CONCURRENCY);
  report.outputs = await mapBounded(sorted, concurrency, async (record) => {
    const stored = await storedFile(backend, joinPrefix(bundlePath, record.path), options.signal);
    const output = outputReport(record, stored);
    options.onEvent?.({
      type: "output_checked",
      pipeline_id: destination.pipeline_id,
      destination_id: destination.destination_id,
      bundle_path: bundlePath,
      path: record.path,
      size: record.size,
      status: output.status,
    });
    return output;
  });
  report.checked_count = report.outputs.length;
  for (const output of report.outputs) {
    if (output.status === "ok") report.ok_count += 1;
    else if (output.status === "missing") report.missing_count += 1;
    else report.changed_count += 1;
  }
  // Every owner's records are managed, whoever is audited.
  const managed = new Set(document.outputs.map((output) => output.path));
  report.unmanaged_entries = unmanagedBelow(bundlePath, managed, listing);
  return report;
}

/**
 * Recorded source → planned outputs → records: what the owner's recorded source gives under the
 * destination's configuration, compared with its records (docs/operations.md, "What a success
 * report promises"). Reads nothing but the state.
 */
function incompleteOutputs(
  destination: DestinationConfig,
  document: StateDocument,
  owner: OwnerScope,
  bundlePath: string,
): AuditIncompleteReport[] {
  const manifest = recordedManifest(document, owner);
  if (manifest === undefined) return [];
  const reconciliation = isSharedRootState(document)
    ? (document.owners.find((o) => sameOwnerScope(o.scope, owner))?.reconciliation.mode ??
      "replace")
    : document.reconciliation.mode;
  const gaps = completenessGaps(
    destinationSelection(destination, manifest, bundlePath),
    manifest,
    ownedRecords(document, owner) ?? [],
    reconciliation,
  );
  const found: AuditIncompleteReport[] = [
    ...gaps.missing.map((path) => ({ path, status: "not_recorded" as const })),
    ...gaps.changed.map((path) => ({ path, status: "recorded_otherwise" as const })),
    ...gaps.retired.map((path) => ({ path, status: "not_produced" as const })),
  ];
  return found.sort((a, b) => compareLogicalPaths(a.path, b.path));
}

function outputReport(
  record: { path: string; sha256: string; size: number; metadata?: OutputMetadata | undefined },
  stored: StoredFile,
): AuditOutputReport {
  return {
    path: record.path,
    status: storedStatus(stored, record),
    sha256: record.sha256,
    size: record.size,
    found_sha256: stored.kind === "file" ? stored.sha256 : null,
    found_size: stored.kind === "file" ? stored.size : null,
    found_type: stored.kind === "missing" ? null : stored.kind,
  };
}

/**
 * Entries below `bundlePath` (backend-relative) that no record manages: neither distributor's
 * own files (state, lease, temp files) nor directories, and not below another bundle path with
 * a state of its own.
 */
function unmanagedBelow(
  bundlePath: string,
  managed: ReadonlySet<string>,
  listing: { entries: readonly StorageEntry[]; bundlePaths: readonly string[] },
): ReconcileStateEntry[] {
  const nested = listing.bundlePaths.filter(
    (other) => other !== bundlePath && isWithinPrefix(bundlePath, other),
  );
  return listing.entries
    .filter((entry) => {
      if (!isWithinPrefix(bundlePath, entry.path) || entry.path === bundlePath) return false;
      if (nested.some((other) => isWithinPrefix(other, entry.path))) return false;
      return isUnmanagedEntry(bundlePath, entry, managed);
    })
    .map(unmanagedEntryReport);
}
