import { access } from "node:fs/promises";
import { join } from "node:path";
import {
  BundleValidationError,
  createManifest,
  DEFAULT_CREATE_MAX_FILES,
  formatTimestamp,
  MANIFEST_FILE_NAME,
  type Manifest,
  ManifestError,
  SIGNATURE_FILE_NAME,
  type SignOptions,
  signBundleManifest,
} from "@distributor/bundle";
import { openLocalDirectory } from "../backends/local-directory.js";
import { withBackend } from "../backends/registry.js";
import { CONFIG_DEFAULTS } from "../config/defaults.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import type { IssueReport } from "./bundle-checks.js";

export interface CreateManifestWorkflowOptions extends WorkflowOptions {
  /** Local bundle directory. */
  path: string;
  /** Bundle id (docs/design/bundles.md pattern). */
  id: string;
  /** Creation time; default now, truncated to whole seconds. */
  created?: Date;
  /** Replace an existing `manifest.json`. */
  force?: boolean;
  /** Most files to list (`--max-files`); default 100000. */
  maxFiles?: number;
  /**
   * Sign the manifest written with this SSH key (`ssh-keygen -Y sign`) into `manifest.json.sig`
   * beside it.
   */
  sign?: Omit<SignOptions, "signal"> | undefined;
}

/** The manifest written by `createManifestWorkflow`; the CLI prints it as JSON. */
export interface ManifestCreateReport {
  /** The bundle directory as given. */
  path: string;
  /** Where the manifest was written. */
  manifest_path: string;
  id: string;
  /** RFC 3339, UTC. */
  created: string;
  digest: string;
  /** Number of files listed. */
  files: number;
  /** Sum of the listed file sizes in bytes. */
  total_size: number;
  /** The signature written beside the manifest, when one was asked for. */
  signature?: {
    path: string;
    fingerprint: string;
    key_type: string;
    namespace: string;
  };
  /**
   * What the manifest is fine for but validation may refuse: `too_many_files` when it lists more
   * files than the default `validation.max_files` (10000), which a pipeline must raise to accept it;
   * `signature_stale` when a `manifest.json.sig` of an earlier manifest is left beside this one.
   */
  warnings: IssueReport[];
}

/**
 * Writes `manifest.json` for a local bundle directory: every regular file below it, with streamed
 * digests and sizes. Refuses symlinks, and an existing manifest unless `force`.
 */
export async function createManifestWorkflow(
  options: CreateManifestWorkflowOptions,
): Promise<ManifestCreateReport> {
  const backend = await openLocalDirectory(options.path);
  return withBackend(backend, async () => {
    let manifest: Manifest;
    try {
      ({ manifest } = await createManifest(backend, "", {
        id: options.id,
        created: options.created,
        force: options.force,
        now: options.now,
        signal: options.signal,
        ...(options.maxFiles === undefined ? {} : { maxFiles: options.maxFiles }),
      }));
    } catch (error) {
      throw namingDirectory(error, options.path);
    }
    const report: ManifestCreateReport = {
      path: options.path,
      manifest_path: join(options.path, MANIFEST_FILE_NAME),
      id: manifest.id,
      created: formatTimestamp(manifest.created),
      digest: manifest.digest,
      files: manifest.files.length,
      total_size: manifest.files.reduce((sum, file) => sum + file.size, 0),
      warnings: limitWarnings(manifest.files.length),
    };
    const signaturePath = join(options.path, SIGNATURE_FILE_NAME);
    if (options.sign !== undefined) {
      const signed = await signBundleManifest(options.path, {
        ...options.sign,
        signal: options.signal,
      });
      report.signature = {
        path: signed.path,
        fingerprint: signed.fingerprint,
        key_type: signed.keyType,
        namespace: signed.namespace,
      };
    } else if (await exists(signaturePath)) {
      report.warnings.push({
        code: "signature_stale",
        path: SIGNATURE_FILE_NAME,
        message: `${signaturePath} signs an earlier manifest, not the one just written: sign again (manifest create --sign) or remove it; a pipeline checking signatures refuses it as it is`,
      });
    }
    return report;
  });
}

/**
 * `manifest create` lists any number of files, but `validate` and `run` refuse more than the
 * pipeline's `validation.max_files`: say so now, before the bundle travels anywhere.
 */
function limitWarnings(files: number): IssueReport[] {
  const maxFiles = CONFIG_DEFAULTS.maxFiles;
  if (files <= maxFiles) return [];
  return [
    {
      code: "too_many_files",
      path: MANIFEST_FILE_NAME,
      message: `${MANIFEST_FILE_NAME} lists ${files} files, more than the default validation.max_files ${maxFiles}: validate and run refuse this bundle unless the pipeline's configuration sets validation.max_files to ${files} or more`,
      expected: maxFiles,
      actual: files,
    },
  ];
}

/** Bundle problems are reported against the directory the operator named, not the backend root. */
function namingDirectory(error: unknown, path: string): unknown {
  if (error instanceof ManifestError) {
    return new ManifestError(error.detail, {
      source: path,
      cause: error,
      ...(error.field === undefined ? {} : { field: error.field }),
      ...(error.code === "empty_bundle" ? { code: error.code } : {}),
    });
  }
  if (!(error instanceof BundleValidationError)) return error;
  const messages = error.issues.map((issue) =>
    issue.code === "too_many_files" && issue.path === ""
      ? `${issue.message} (--max-files, default ${DEFAULT_CREATE_MAX_FILES}); pass --max-files ${issue.actual ?? ""} or more to list them`
      : issue.message,
  );
  const message =
    messages.length === 1
      ? `${path}: ${messages[0]}`
      : `${path}: ${messages.length} problems: ${messages.slice(0, 10).join("; ")}${messages.length > 10 ? "; ..." : ""}`;
  return new BundleValidationError(error.issues, { message, cause: error });
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
