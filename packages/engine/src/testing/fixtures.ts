import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildManifest, FileHasher, type Manifest, serializeManifest } from "@distributor/bundle";
import {
  ownerScope,
  type ReconciliationMode,
  type SharedRootOutputRecord,
  type SharedRootState,
  type SingleOwnerState,
  type StateDocument,
  type StateMode,
  serializeDocument,
} from "@distributor/state";
import {
  createLocalBackend,
  createMemoryBackend,
  joinPrefix,
  type StorageBackend,
  StorageError,
  statePath,
  type WriteData,
  type WriteOptions,
} from "@distributor/storage";
import { executePublish } from "../execute/execute.js";
import {
  DEFAULT_TRANSFER_POLICY,
  type LinkPolicy,
  type OutputPolicy,
  type PublishPlan,
  type PublishTargetOptions,
  planTarget,
  selectOutputs,
  type TransferPolicy,
} from "../index.js";

type PublishPolicy = Pick<OutputPolicy, "source" | "html">;

export const CREATED = new Date("2026-06-04T11:55:00Z");
export const EARLIER = new Date("2026-05-30T11:12:00Z");

export function digestOf(text: string): { sha256: string; size: number } {
  const hasher = new FileHasher();
  hasher.update(Buffer.from(text, "utf8"));
  return hasher.digest();
}

export function manifestFor(
  files: Record<string, string>,
  options: { id?: string; created?: Date } = {},
): Manifest {
  return buildManifest({
    id: options.id ?? "reports.example",
    created: options.created ?? CREATED,
    files: Object.entries(files).map(([path, text]) => ({ path, ...digestOf(text) })),
  });
}

/** Writes a bundle (files and manifest.json) below `bundlePath` and returns its manifest. */
export async function writeSourceBundle(
  backend: StorageBackend,
  bundlePath: string,
  files: Record<string, string>,
  options: { id?: string; created?: Date } = {},
): Promise<Manifest> {
  const manifest = manifestFor(files, options);
  for (const [path, text] of Object.entries(files)) {
    await backend.writeFile(joinPrefix(bundlePath, path), text, { overwrite: true });
  }
  await backend.writeFile(joinPrefix(bundlePath, "manifest.json"), serializeManifest(manifest), {
    overwrite: true,
  });
  return manifest;
}

/** Single-owner state recording source copies of every manifest file. */
export function singleOwnerState(
  manifest: Manifest,
  options: {
    pipelineId?: string;
    destinationId?: string;
    at?: Date;
    reconciliation?: ReconciliationMode;
  } = {},
): SingleOwnerState {
  const at = options.at ?? EARLIER;
  return {
    schemaVersion: 2,
    distributorVersion: "test",
    pipelineId: options.pipelineId ?? "reports",
    destinationId: options.destinationId ?? "archive",
    publishedAt: at,
    createdAt: at,
    updatedAt: at,
    state: { mode: "single_owner" },
    reconciliation: { mode: options.reconciliation ?? "replace" },
    source: { manifest },
    outputs: manifest.files.map((file) => ({
      path: file.path,
      kind: "source" as const,
      sourcePath: file.path,
      sha256: file.sha256,
      size: file.size,
      createdAt: at,
      updatedAt: at,
    })),
  };
}

/** Shared-root state holding one owner `other/archive` with `other/report.md` (like the reference). */
export function sharedRootWithOther(at: Date = EARLIER): SharedRootState {
  const other = manifestFor({ "other/report.md": "# Other\n" }, { id: "other.source" });
  const scope = ownerScope("other", "archive");
  return {
    schemaVersion: 3,
    distributorVersion: "test",
    createdAt: at,
    updatedAt: at,
    state: { mode: "shared_root" },
    owners: [{ scope, reconciliation: { mode: "replace" }, source: { manifest: other } }],
    outputs: other.files.map((file) => sharedRecord(file.path, file, scope, other, at)),
  };
}

export function sharedRecord(
  path: string,
  file: { sha256: string; size: number },
  scope: { pipelineId: string; destinationId: string },
  manifest: Manifest,
  at: Date,
): SharedRootOutputRecord {
  return {
    path,
    kind: "source",
    sourcePath: path,
    sha256: file.sha256,
    size: file.size,
    owner: scope,
    sourceId: manifest.id,
    sourceDigest: manifest.digest,
    sourceCreated: manifest.created,
    createdAt: at,
    updatedAt: at,
  };
}

/** Adds `reports/archive` as an owner whose older manifest also held `old.md`. */
export function withCurrentOwner(state: SharedRootState, current: Manifest): SharedRootState {
  const older = manifestFor(
    { "report.md": "# Report\nOld.\n", "old.md": "old\n" },
    { id: current.id, created: new Date(current.created.getTime() - 3_600_000) },
  );
  const scope = ownerScope("reports", "archive");
  return {
    ...state,
    owners: [
      ...state.owners,
      { scope, reconciliation: { mode: "replace" }, source: { manifest: older } },
    ],
    outputs: [
      ...state.outputs,
      ...older.files.map((file) => sharedRecord(file.path, file, scope, older, state.createdAt)),
    ],
  };
}

/** Writes a state document and, for every recorded output, a file holding `old`. */
export async function writeStateWithOutputs(
  backend: StorageBackend,
  bundlePath: string,
  document: StateDocument,
): Promise<void> {
  await backend.writeFile(statePath(bundlePath), serializeDocument(document), { overwrite: true });
  for (const output of document.outputs) {
    await backend.writeFile(joinPrefix(bundlePath, output.path), "old", { overwrite: true });
  }
}

export async function readText(backend: StorageBackend, path: string): Promise<string> {
  return Buffer.from(await backend.readFile(path)).toString("utf8");
}

export async function exists(backend: StorageBackend, path: string): Promise<boolean> {
  try {
    await backend.stat(path);
    return true;
  } catch (error) {
    if (error instanceof StorageError && error.kind === "not_found") return false;
    throw error;
  }
}

export interface PublishCase {
  source: StorageBackend;
  sourceBundlePath: string;
  manifest: Manifest;
  destination: StorageBackend;
  bundlePath?: string;
  pipelineId?: string;
  destinationId?: string;
  stateMode?: StateMode;
  reconciliation?: ReconciliationMode;
  pathMapping?: "preserve_relative" | "fixed";
  publish?: PublishPolicy;
  markdownMode?: "sidecar" | "index";
  links?: LinkPolicy;
  transfer?: TransferPolicy;
  force?: boolean;
  now?: Date;
  /** Entries listed below the destination bundle path before giving up. */
  walkLimit?: number;
}

/** Prepares, inspects and plans one publication the way `run` does. */
export async function planCase(c: PublishCase): Promise<PublishPlan> {
  const bundlePath = c.bundlePath ?? c.sourceBundlePath;
  const publish = c.publish ?? { source: true, html: false };
  const selection = selectOutputs(c.manifest, {
    source: publish.source,
    html: publish.html,
    markdownMode: publish.html ? (c.markdownMode ?? "sidecar") : undefined,
  });
  return planTarget({
    source: c.source,
    sourceBundlePath: c.sourceBundlePath,
    destination: c.destination,
    target: {
      owner: ownerScope(c.pipelineId ?? "reports", c.destinationId ?? "archive"),
      manifest: c.manifest,
      bundlePath,
      stateMode: c.stateMode ?? "single_owner",
      reconciliation: c.reconciliation ?? "replace",
      pathMapping: c.pathMapping ?? "preserve_relative",
      transfer: c.transfer ?? DEFAULT_TRANSFER_POLICY,
      force: c.force ?? false,
    },
    selection,
    links: c.links,
    now: c.now ?? new Date("2026-06-04T12:00:00Z"),
    distributorVersion: "test",
    walkLimit: c.walkLimit,
  });
}

/**
 * Options for `publishTarget` (plan, lease, commit) of `manifest` from `reports` in `source` to
 * `reports` in `destination`, owned by reports/archive, without lease renewal.
 */
export function publishTargetOptions(
  source: StorageBackend,
  destination: StorageBackend,
  manifest: Manifest,
  options: {
    reconciliation?: ReconciliationMode;
    publish?: PublishPolicy;
    now?: Date;
    onPlan?: PublishTargetOptions["onPlan"];
  } = {},
): PublishTargetOptions {
  const publish = options.publish ?? { source: true, html: false };
  return {
    plan: {
      source,
      sourceBundlePath: "reports",
      destination,
      target: {
        owner: ownerScope("reports", "archive"),
        manifest,
        bundlePath: "reports",
        stateMode: "single_owner",
        reconciliation: options.reconciliation ?? "replace",
        pathMapping: "preserve_relative",
        transfer: DEFAULT_TRANSFER_POLICY,
        force: false,
      },
      selection: selectOutputs(manifest, {
        source: publish.source,
        html: publish.html,
        markdownMode: publish.html ? "sidecar" : undefined,
      }),
      distributorVersion: "test",
    },
    now: () => options.now ?? new Date("2026-06-06T10:00:00Z"),
    dryRun: false,
    lease: { renew: false },
    execute: {},
    onPlan: options.onPlan,
  };
}

export async function executeCase(c: PublishCase, plan: PublishPlan): Promise<void> {
  await executePublish(
    { source: c.source, sourceBundlePath: c.sourceBundlePath, destination: c.destination },
    plan,
  );
}

/** Wraps a backend so that writing one path fails, to inject a fault mid-publication. */
export function failingWrites(backend: StorageBackend, failPath: string): StorageBackend {
  return new Proxy(backend, {
    get(target, property, receiver) {
      if (property === "writeFile") {
        return async (path: string, data: WriteData, options?: WriteOptions) => {
          if (path === failPath) {
            throw new StorageError({
              kind: "unavailable",
              operation: "write file",
              backend: target.name,
              path,
              detail: "injected failure",
            });
          }
          return target.writeFile(path, data, options);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The backends the engine suites run on: memory, and the real filesystem (POSIX conventions). */
export const BACKEND_KINDS = ["memory", "local"] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

let backendKind: BackendKind = "memory";
const tempDirs: string[] = [];

/** Chooses what `newBackend` creates, for the tests of one `describe.each(BACKEND_KINDS)` block. */
export function useBackendKind(kind: BackendKind): void {
  backendKind = kind;
}

/** A fresh, empty (or seeded) backend of the kind in use: memory, or a temp directory. */
export function newBackend(options: { files?: Record<string, string> } = {}): StorageBackend {
  if (backendKind === "memory") return createMemoryBackend(options);
  const root = mkdtempSync(join(tmpdir(), "distributor-engine-"));
  tempDirs.push(root);
  for (const [path, text] of Object.entries(options.files ?? {})) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return createLocalBackend({ root });
}

/** Removes the temp directories `newBackend` made; call from `afterAll`. */
export function removeTempBackends(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}
