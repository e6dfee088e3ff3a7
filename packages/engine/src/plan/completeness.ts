import type { Manifest, ManifestFile } from "@distributor/bundle";
import type { DecodedDigest, OutputKind, OutputMetadata } from "@distributor/state";
import { runSteps, type Steps } from "@distributor/storage";
import type { OutputSelection } from "./outputs.js";

/** What completeness compares of one record: what the output is made of and what it holds. */
export interface CompletenessRecord {
  path: string;
  kind: OutputKind;
  sourcePath: string;
  transform?: string | undefined;
  sha256: string;
  size: number;
  metadata?: OutputMetadata | undefined;
  decoded?: DecodedDigest | undefined;
}

/**
 * Where an owner's records fall short of the publication its recorded source gives under the
 * configuration in force (docs/operations.md, "What a success report promises").
 */
export interface CompletenessGaps {
  /** Planned outputs no record covers. */
  missing: string[];
  /**
   * Planned outputs whose record describes something else: another kind, source file or
   * transform, or (for a copy) other bytes than the recorded source's file.
   */
  changed: string[];
  /**
   * Records of outputs the configuration no longer produces. Only for `replace` reconciliation:
   * `merge` keeps outputs of earlier publications on purpose.
   */
  retired: string[];
}

/** True when the gaps hold nothing: the records are the planned outputs. */
export function isComplete(gaps: CompletenessGaps): boolean {
  return gaps.missing.length === 0 && gaps.changed.length === 0 && gaps.retired.length === 0;
}

/**
 * Compares the outputs the configuration selects from `manifest` with the owner's `records`,
 * without reading or rendering anything: a copy's bytes are the manifest file's (before any
 * encoding, which the metadata rules decide and `update_metadata` converges); a rendered output is
 * the same when its source file and transform are (the source file's bytes are the manifest's).
 * Metadata is not compared here. Linear in the number of outputs.
 */
export function completenessGaps(
  planned: readonly OutputSelection[],
  manifest: Manifest,
  records: readonly CompletenessRecord[],
  reconciliation: "replace" | "merge",
): CompletenessGaps {
  return runSteps(completenessGapsSteps(planned, manifest, records, reconciliation));
}

/** Files, records or outputs looked at between two pauses of `completenessGapsSteps`. */
const STEP_ITEMS = 2000;

/** `completenessGaps` as steps that pause every few thousand items (seconds at 10⁶ outputs). */
export function* completenessGapsSteps(
  planned: readonly OutputSelection[],
  manifest: Manifest,
  records: readonly CompletenessRecord[],
  reconciliation: "replace" | "merge",
): Steps<CompletenessGaps> {
  const gaps: CompletenessGaps = { missing: [], changed: [], retired: [] };
  const aligned = yield* alignedGapsSteps(planned, manifest, records);
  if (aligned !== undefined) return aligned;
  const files = new Map<string, ManifestFile>();
  for (const file of manifest.files) {
    files.set(file.path, file);
    if (files.size % STEP_ITEMS === 0) yield;
  }
  const recorded = new Map<string, CompletenessRecord>();
  for (const record of records) {
    recorded.set(record.path, record);
    if (recorded.size % STEP_ITEMS === 0) yield;
  }
  const plannedPaths = new Set<string>();
  for (const output of planned) {
    if (plannedPaths.size % STEP_ITEMS === STEP_ITEMS - 1) yield;
    plannedPaths.add(output.path);
    const record = recorded.get(output.path);
    if (record === undefined) gaps.missing.push(output.path);
    else if (!describesOutput(record, output, files.get(output.sourcePath))) {
      gaps.changed.push(output.path);
    }
  }
  if (reconciliation === "replace") {
    for (const [index, record] of records.entries()) {
      if (index % STEP_ITEMS === STEP_ITEMS - 1) yield;
      if (!plannedPaths.has(record.path)) gaps.retired.push(record.path);
    }
  }
  return gaps;
}

/**
 * The gaps when the records are the planned outputs, one for one and in the same order, with
 * distinct paths (what a skip usually compares): pairwise, without the maps of every path that
 * the general comparison builds (three of a million entries each). Nothing is missing or retired
 * then; only changed outputs can be found. Undefined when they are not aligned so.
 */
function* alignedGapsSteps(
  planned: readonly OutputSelection[],
  manifest: Manifest,
  records: readonly CompletenessRecord[],
): Steps<CompletenessGaps | undefined> {
  if (planned.length !== records.length) return undefined;
  for (let index = 0; index < planned.length; index++) {
    const path = (planned[index] as OutputSelection).path;
    // Strictly increasing: distinct, so each path has one record, as the maps would find.
    if (path !== records[index]?.path || (index > 0 && !(planned[index - 1]!.path < path))) {
      return undefined;
    }
    if (index % STEP_ITEMS === STEP_ITEMS - 1) yield;
  }
  const changed: string[] = [];
  let files: Map<string, ManifestFile> | undefined;
  for (let index = 0; index < planned.length; index++) {
    if (index % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const output = planned[index] as OutputSelection;
    // Usually the manifest entry at the same index; else looked up (a map built on first need).
    let file = manifest.files[index];
    if (file?.path !== output.sourcePath) {
      files ??= new Map(manifest.files.map((entry) => [entry.path, entry]));
      file = files.get(output.sourcePath);
    }
    if (!describesOutput(records[index] as CompletenessRecord, output, file)) {
      changed.push(output.path);
    }
  }
  return { missing: [], changed, retired: [] };
}

function describesOutput(
  record: CompletenessRecord,
  output: OutputSelection,
  file: ManifestFile | undefined,
): boolean {
  if (record.kind !== output.kind || record.sourcePath !== output.sourcePath) return false;
  if ((record.transform ?? undefined) !== (output.transform ?? undefined)) return false;
  if (output.kind !== "source") return true;
  if (file === undefined) return false;
  const bytes = record.decoded ?? record;
  return bytes.sha256 === file.sha256 && bytes.size === file.size;
}

/** One line naming the gaps, at most a few paths of each kind. */
export function describeGaps(gaps: CompletenessGaps, list: (paths: string[]) => string): string {
  const parts: string[] = [];
  if (gaps.missing.length > 0) {
    parts.push(`${gaps.missing.length} output(s) not recorded: ${list(gaps.missing)}`);
  }
  if (gaps.changed.length > 0) {
    parts.push(`${gaps.changed.length} recorded otherwise: ${list(gaps.changed)}`);
  }
  if (gaps.retired.length > 0) {
    parts.push(`${gaps.retired.length} no longer produced: ${list(gaps.retired)}`);
  }
  return parts.join("; ");
}
