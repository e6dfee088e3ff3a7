import { formatTimestamp, type Manifest } from "@distributor/bundle";
import {
  type DestinationLimit,
  isStateFile,
  type LeaseReport,
  readLease,
  readStateFile,
} from "@distributor/engine";
import {
  formatStateTimestamp,
  isSharedRootState,
  ownerOutputs,
  type ReconciliationMode,
  type ReplacementMarker,
  type SourceSigner,
  type StateDocument,
  type StateMode,
} from "@distributor/state";
import { displayPath, parentPath, type StorageBackend } from "@distributor/storage";

/** A pipeline/destination pair that published into a state file. */
export interface StateOwnerReport {
  pipeline_id: string;
  destination_id: string;
  reconciliation: ReconciliationMode;
  /**
   * Identity of the source bundle the owner published last, and who signed it when the pipeline
   * checked signatures (`source.signatures`).
   */
  source: {
    id: string;
    created: string;
    digest: string;
    files: number;
    signer?: { principal: string; fingerprint: string };
  };
  primary_url?: string;
  /** Number of outputs this owner manages. */
  outputs: number;
  /**
   * Present while a run of this owner is writing here (or died doing so): its records may not
   * describe what is stored until that run, or the recovery of it, finishes.
   */
  replacing?: { run_id: string; started_at: string };
}

/** One managed output recorded in a state file. */
export interface StateOutputReport {
  path: string;
  kind: "source" | "generated";
  source_path: string;
  transform?: string;
  url?: string;
  sha256: string;
  size: number;
  created_at: string;
  updated_at: string;
  pipeline_id: string;
  destination_id: string;
}

/** What one `.distributor.json` records. */
export interface StateReport {
  /** Destination bundle path the state belongs to; `.` for the root. */
  path: string;
  /** Logical path of the state file. */
  state_file: string;
  /** `schema_version` as written in the file (1 is read as single-owner state). */
  schema_version: number;
  mode: StateMode;
  distributor_version?: string;
  created_at: string;
  updated_at: string;
  /** Single-owner state only: when the recorded source was published. */
  published_at?: string;
  owners: StateOwnerReport[];
  outputs: StateOutputReport[];
  /** The lease beside the state file, when a run holds (or a dead run left) one; else null. */
  lease: LeaseReport | null;
  /**
   * Under `layout: releases` (inspecting a configured destination): every committed release,
   * oldest first. Absent otherwise.
   */
  releases?: ReleaseListing[];
}

/** One committed release of a bundle path. */
export interface ReleaseListing {
  id: string;
  /** `current` links to it. */
  current: boolean;
  /** The state records it (differs from `current` only until a run that died switching is finished). */
  recorded: boolean;
  /**
   * `live` (`current` links to it), `staged` (committed, newer than the live release: waiting
   * for `distributor promote`) or `earlier` (what `distributor rollback` returns to).
   */
  status: "live" | "staged" | "earlier";
  /** For a staged release, where it can be looked at (`releases.preview_url`); else null. */
  preview_url: string | null;
  source_id: string;
  source_created: string;
  source_digest: string;
  published_at: string;
  outputs: number;
}

/**
 * Reads and describes the state file at `statePath`, at most `limit` of it; an unparseable one
 * fails with `state_invalid`, a larger one with `storage_limit_exceeded` naming the bound.
 */
export async function inspectStateFile(
  backend: StorageBackend,
  statePath: string,
  signal: AbortSignal | undefined,
  limit: DestinationLimit,
): Promise<StateReport> {
  const { text, document } = await readStateFile(backend, statePath, signal, limit);
  // Parsing normalises schema 1 to 2; the report shows what the file says.
  const written = (JSON.parse(text) as { schema_version: number }).schema_version;
  const bundlePath = parentPath(statePath);
  const lease = (await readLease(backend, bundlePath, signal)) ?? null;
  return { ...stateReport(document, bundlePath, statePath, written), lease };
}

/** Logical paths of every state file in the backend, in path order (bounded walk). */
export async function findStateFiles(
  backend: StorageBackend,
  limit: number,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const entries = await backend.walk("", { recursive: true, limit, signal });
  return entries
    .filter((entry) => entry.kind === "file" && isStateFile(entry.path))
    .map((entry) => entry.path);
}

export { isStateFile };

function stateReport(
  document: StateDocument,
  bundlePath: string,
  statePath: string,
  writtenVersion: number,
): Omit<StateReport, "lease"> {
  const common = {
    path: displayPath(bundlePath),
    state_file: statePath,
    schema_version: writtenVersion,
    mode: document.state.mode,
    ...(document.distributorVersion === undefined
      ? {}
      : { distributor_version: document.distributorVersion }),
    created_at: formatStateTimestamp(document.createdAt),
    updated_at: formatStateTimestamp(document.updatedAt),
  };
  if (isSharedRootState(document)) {
    return {
      ...common,
      owners: document.owners.map((owner) =>
        ownerReport(
          owner.scope.pipelineId,
          owner.scope.destinationId,
          owner.reconciliation.mode,
          owner.source,
          owner.links?.primaryUrl,
          ownerOutputs(document, owner.scope).length,
          owner.replacing,
        ),
      ),
      outputs: document.outputs.map((output) =>
        outputReport(output, output.owner.pipelineId, output.owner.destinationId),
      ),
    };
  }
  return {
    ...common,
    published_at: formatStateTimestamp(document.publishedAt),
    owners: [
      ownerReport(
        document.pipelineId,
        document.destinationId,
        document.reconciliation.mode,
        document.source,
        document.links?.primaryUrl,
        document.outputs.length,
        document.replacing,
      ),
    ],
    outputs: document.outputs.map((output) =>
      outputReport(output, document.pipelineId, document.destinationId),
    ),
  };
}

function ownerReport(
  pipelineId: string,
  destinationId: string,
  reconciliation: ReconciliationMode,
  { manifest, signer }: { manifest: Manifest; signer?: SourceSigner | undefined },
  primaryUrl: string | undefined,
  outputs: number,
  replacing: ReplacementMarker | undefined,
): StateOwnerReport {
  return {
    pipeline_id: pipelineId,
    destination_id: destinationId,
    reconciliation,
    source: {
      id: manifest.id,
      created: formatTimestamp(manifest.created),
      digest: manifest.digest,
      files: manifest.files.length,
      ...(signer === undefined
        ? {}
        : { signer: { principal: signer.principal, fingerprint: signer.fingerprint } }),
    },
    ...(primaryUrl === undefined ? {} : { primary_url: primaryUrl }),
    outputs,
    ...(replacing === undefined
      ? {}
      : {
          replacing: {
            run_id: replacing.runId,
            started_at: formatStateTimestamp(replacing.startedAt),
          },
        }),
  };
}

function outputReport(
  output: StateDocument["outputs"][number],
  pipelineId: string,
  destinationId: string,
): StateOutputReport {
  return {
    path: output.path,
    kind: output.kind,
    source_path: output.sourcePath,
    ...(output.transform === undefined ? {} : { transform: output.transform }),
    ...(output.url === undefined ? {} : { url: output.url }),
    sha256: output.sha256,
    size: output.size,
    created_at: formatStateTimestamp(output.createdAt),
    updated_at: formatStateTimestamp(output.updatedAt),
    pipeline_id: pipelineId,
    destination_id: destinationId,
  };
}
