// A pipeline's source bundles, read and validated (portable names included) before any destination
// is planned.
import {
  type BundleIssue,
  type BundleSigner,
  BundleValidationError,
  describeNameCollision,
  discoverBundles,
  type FileCheckProgress,
  type Manifest,
  type NameCollision,
  nameCollisionIssues,
  nameCollisionsSteps,
  readManifest,
  readSignedManifest,
  validateBundle,
} from "@distributor/bundle";
import { selectOutputs } from "@distributor/engine";
import type { SourceSigner } from "@distributor/state";
import {
  displayPath,
  runInSlices,
  type Steps,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import type { PipelineConfig } from "../config/types.js";
import { bundleRefusalCode, WorkflowError } from "../errors.js";
import { noBundlesError } from "../shared/no-bundles.js";
import { signaturePolicy } from "../validate/signatures.js";
import type { RunOptions, RunReport } from "./types.js";

/**
 * Names of the manifests, and of the outputs each destination would write from them (rendered
 * HTML included), that are one name on case-insensitive or normalising stores or with a file
 * distributor keeps: warnings in the report, or, under `validation.portable_names: true`, an
 * invalid bundle before anything is planned. Read from the manifests and the configuration
 * alone, so a run that only skips says so too.
 */
export async function checkPortableNames(
  pipeline: PipelineConfig,
  bundles: SourceBundle[],
  report: RunReport,
): Promise<void> {
  for (const bundle of bundles) {
    // Seconds of work at a million files: in slices, the event loop turning between them.
    const issues = await runInSlices(portableNameIssuesSteps(pipeline, bundle.manifest));
    if (issues.length === 0) continue;
    if (pipeline.validation.portableNames) {
      throw bundleInvalid(
        new BundleValidationError(issues, { bundlePath: bundle.path }),
        bundle.path,
      );
    }
    for (const issue of issues) {
      report.warnings.push({
        pipeline_id: pipeline.id,
        bundle_path: displayPath(bundle.path),
        code: issue.code,
        path: issue.path,
        message: issue.message,
      });
    }
  }
}

function* portableNameIssuesSteps(
  pipeline: PipelineConfig,
  manifest: Manifest,
): Steps<BundleIssue[]> {
  const listed = yield* nameCollisionsSteps(manifest.files.map((file) => file.path));
  return [
    ...nameCollisionIssues(manifest, listed),
    ...(yield* outputNameIssuesSteps(pipeline, manifest, listed)),
  ];
}

/**
 * Collisions among the output paths the pipeline's destinations would write from `manifest` that
 * the manifest's own names do not already show: a rendered `Notes.md` as `Notes.html` against a
 * listed `notes.html`, say. One issue per collision, whatever the number of destinations. A
 * selection that fails (index mode meeting two Markdown files) is left to planning to report.
 */
function* outputNameIssuesSteps(
  pipeline: PipelineConfig,
  manifest: Manifest,
  manifestCollisions: readonly NameCollision[],
): Steps<BundleIssue[]> {
  const listed = new Set(manifestCollisions.map((c) => c.paths.join("\0")));
  const issues = new Map<string, BundleIssue>();
  for (const destination of pipeline.destinations) {
    const html = destination.publish.html && destination.transform.markdownToHtml.enabled;
    let outputs: ReturnType<typeof selectOutputs>;
    try {
      outputs = selectOutputs(manifest, {
        source: destination.publish.source,
        html: destination.publish.html,
        markdownMode: html ? destination.transform.markdownToHtml.mode : undefined,
      });
    } catch {
      continue;
    }
    yield;
    // Every listed file under its own name: the outputs' names are the manifest's, whose
    // collisions are reported already.
    const asListed =
      outputs.length === manifest.files.length &&
      outputs.every((output) => output.path === output.sourcePath);
    if (asListed) continue;
    const from = new Map(outputs.map((output) => [output.path, output.sourcePath]));
    const collisions = yield* nameCollisionsSteps(outputs.map((output) => output.path));
    for (const collision of collisions) {
      const key = collision.paths.join("\0");
      if (listed.has(key) || issues.has(key)) continue;
      // Outputs rendered from colliding sources (`A.md`, `a.md`) repeat what the manifest says.
      const sources = collision.paths.map((path) => from.get(path));
      const folded = new Set(sources.map((path) => path?.normalize("NFC").toLowerCase()));
      if (collision.kind !== "reserved" && !sources.includes(undefined) && folded.size === 1) {
        continue;
      }
      issues.set(key, {
        code: "name_collision",
        path: collision.paths[0] ?? "",
        message: `destination ${destination.id} outputs ${describeNameCollision(collision)}`,
      });
    }
  }
  return [...issues.values()];
}

/**
 * The most entries of a bundle's discovery listing kept for its validation to use instead of
 * walking the bundle again. A bigger bundle is walked again when it is validated: a run that only
 * skips never validates, and a listing of a million entries (paths, kinds, sizes) held for nothing
 * is over 100 MB of heap; the second walk costs a publication of that size seconds.
 */
const REUSED_LISTING_ENTRIES = 20_000;

/**
 * Discovers the bundles of a pipeline's source and reads their manifests (no hashing yet). Under
 * `source.signatures` each manifest is read with its signature and refused unless it holds.
 */
export async function readPipelineManifests(
  options: RunOptions,
  pipeline: PipelineConfig,
  source: StorageBackend,
): Promise<SourceBundle[]> {
  const discovered = await discoverBundles(source, "", { signal: options.signal });
  if (discovered.length === 0) throw await noBundlesError(pipeline, source);
  const signatures = await signaturePolicy(pipeline, options);
  const reading = { signal: options.signal, maxFiles: pipeline.validation.maxFiles };
  const bundles: SourceBundle[] = [];
  for (const bundle of discovered) {
    try {
      const read: { manifest: Manifest; signer?: BundleSigner | undefined } =
        signatures === undefined
          ? { manifest: await readManifest(source, bundle.bundlePath, reading) }
          : await readSignedManifest(source, bundle.bundlePath, signatures, reading);
      const found: SourceBundle = {
        path: bundle.path,
        manifest: read.manifest,
        entries: bundle.entries.length <= REUSED_LISTING_ENTRIES ? bundle.entries : undefined,
      };
      if (read.signer !== undefined) found.signer = read.signer;
      bundles.push(found);
    } catch (error) {
      throw bundleInvalid(error, bundle.path);
    }
  }
  return bundles;
}

/** Files hashed at once while validating: one read chunk in memory each. */
const VALIDATION_CONCURRENCY = 8;

/** Validates every bundle in full (docs/design/bundles.md), each against the manifest planning used. */
export async function validatePipelineBundles(
  options: RunOptions,
  pipeline: PipelineConfig,
  source: StorageBackend,
  bundles: SourceBundle[],
): Promise<void> {
  const onEvent = options.onEvent;
  if (onEvent !== undefined) {
    let files = 0;
    let bytes = 0;
    for (const bundle of bundles) {
      files += bundle.manifest.files.length;
      for (const file of bundle.manifest.files) bytes += file.size;
    }
    onEvent({
      type: "validation_start",
      pipeline_id: pipeline.id,
      bundles: bundles.length,
      files,
      bytes,
    });
  }
  for (const bundle of bundles) {
    let result: Awaited<ReturnType<typeof validateBundle>>;
    try {
      // The manifest planning used and the listing discovery made: read and walked once.
      result = await validateBundle(source, bundle.path, {
        unlistedFiles: pipeline.validation.unlistedFiles,
        maxFiles: pipeline.validation.maxFiles,
        maxTotalSize: pipeline.validation.maxTotalSize,
        portableNames: pipeline.validation.portableNames ? "refuse" : "warn",
        manifest: bundle.manifest,
        ...(bundle.entries === undefined ? {} : { listed: bundle.entries }),
        concurrency: VALIDATION_CONCURRENCY,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(onEvent === undefined
          ? {}
          : {
              onFile: (file: FileCheckProgress) =>
                onEvent({
                  type: "file_validated",
                  pipeline_id: pipeline.id,
                  bundle_path: displayPath(bundle.path),
                  path: file.path,
                  size: file.size,
                }),
            }),
      });
    } catch (error) {
      throw bundleInvalid(error, bundle.path);
    }
    // Nothing after validation reads the listing; 20 000 entries are megabytes of heap.
    bundle.entries = undefined;
    options.onEvent?.({
      type: "bundle_validated",
      pipeline_id: pipeline.id,
      bundle_path: displayPath(bundle.path),
      files: result.manifest.files.length,
      bytes: result.totalSize,
    });
  }
}

/** What the state records of a bundle's signer: the principal and the key's fingerprint. */
export function recordedSigner(signer: BundleSigner | undefined): SourceSigner | undefined {
  return signer === undefined
    ? undefined
    : { principal: signer.principal, fingerprint: signer.fingerprint };
}

function bundleInvalid(error: unknown, path: string): unknown {
  if (!(error instanceof BundleValidationError)) return error;
  // The message already names the bundle; the report names the pipeline.
  const message = error.message.startsWith("bundle ")
    ? error.message
    : `bundle ${displayPath(path)}: ${error.message}`;
  return new WorkflowError(bundleRefusalCode(error), message, { cause: error });
}

/** A discovered bundle and its manifest, read but not yet validated. */
export interface SourceBundle {
  path: string;
  manifest: Manifest;
  /**
   * What discovery listed below the bundle, validated instead of walking it again; dropped once
   * the bundle is validated.
   */
  entries: readonly StorageEntry[] | undefined;
  /** Who signed the manifest, when the source checks signatures and the bundle is signed. */
  signer?: BundleSigner;
}
