import { posix } from "node:path";
import type { Manifest } from "@distributor/bundle";
import type { DecodedDigest, OutputMetadata } from "@distributor/state";
import { compareLogicalPaths, join } from "@distributor/storage";
import {
  htmlOutputPath,
  isMarkdownPath,
  MARKDOWN_TO_HTML,
  type MarkdownMode,
} from "../content/markdown-paths.js";
import type { MetadataRules } from "../content/metadata.js";
import { PublishPlanError } from "./errors.js";
import { type OutputKind, outputUrl, type PrimaryPolicy, selectPrimaryUrl } from "./links.js";

export type { OutputKind } from "./links.js";

/** What a destination publishes from a bundle. */
export interface OutputPolicy {
  source: boolean;
  html: boolean;
  /** Markdown rendering mode; required when `html` is true. */
  markdownMode?: MarkdownMode | undefined;
}

export interface LinkPolicy {
  baseUrl: string;
  primary: PrimaryPolicy;
}

/** One output chosen for a bundle, before its bytes are known. */
export interface OutputSelection {
  /** Path relative to the destination bundle path. */
  path: string;
  kind: OutputKind;
  /** Manifest path the output is made from. */
  sourcePath: string;
  transform?: typeof MARKDOWN_TO_HTML | undefined;
  /** Object metadata from the destination's first matching rule (`withMetadata`). */
  metadata?: OutputMetadata | undefined;
}

/**
 * An output with the digest and size of the bytes that will be stored: for an output with a
 * `Content-Encoding`, the encoded bytes, and `decoded` holds the digest of the bytes before.
 */
export interface PlannedOutput extends OutputSelection {
  url?: string | undefined;
  sha256: string;
  size: number;
  decoded?: DecodedDigest | undefined;
  /**
   * Bytes of a generated output as stored (rendered, and encoded when it is); source copies
   * stream from the source instead.
   */
  content?: Uint8Array | undefined;
}

/**
 * The selection with the metadata of each output's first matching rule; unchanged (the same
 * objects) when the destination has no rules.
 */
export function withMetadata(
  selection: readonly OutputSelection[],
  rules: MetadataRules,
  bundlePath: string,
): OutputSelection[] {
  if (rules.empty) return [...selection];
  return selection.map((output) => {
    const metadata = rules.for(bundlePath, output.path);
    if (metadata === undefined) return output;
    const selected: OutputSelection = {
      path: output.path,
      kind: output.kind,
      sourcePath: output.sourcePath,
    };
    if (output.transform !== undefined) selected.transform = output.transform;
    selected.metadata = metadata;
    return selected;
  });
}

/**
 * Chooses the outputs of a bundle: copies of every manifest file and/or HTML rendered from every
 * Markdown file. Fails when index mode meets two Markdown files in one directory, or when two
 * outputs would land on the same path.
 */
export function selectOutputs(manifest: Manifest, policy: OutputPolicy): OutputSelection[] {
  const selected: OutputSelection[] = [];
  if (policy.source) {
    for (const file of manifest.files) {
      selected.push({ path: file.path, kind: "source", sourcePath: file.path });
    }
  }
  if (policy.html) {
    const mode = policy.markdownMode;
    if (mode === undefined) {
      throw new PublishPlanError("publish.html requires transform.markdown_to_html to be enabled");
    }
    const markdown = manifest.files.filter((file) => isMarkdownPath(file.path));
    if (mode === "index") rejectSharedIndexDirectories(markdown.map((file) => file.path));
    for (const file of markdown) {
      selected.push({
        path: htmlOutputPath(file.path, mode),
        kind: "generated",
        sourcePath: file.path,
        transform: MARKDOWN_TO_HTML,
      });
    }
  }
  // Copies alone have the manifest's paths, distinct and (in a parsed or built manifest) already
  // in order: a million of them need neither the collision map nor a sort.
  if (!policy.html) return inPathOrder(selected);
  const seen = new Map<string, OutputSelection>();
  for (const output of selected) {
    const previous = seen.get(output.path);
    if (previous !== undefined) {
      throw new PublishPlanError(
        `destination output path collision: ${output.path} is produced from both ${describe(previous)} and ${describe(output)}`,
      );
    }
    seen.set(output.path, output);
  }
  return selected.sort((a, b) => compareLogicalPaths(a.path, b.path));
}

/** `outputs` sorted by path, in place; checked first, since they usually are. */
function inPathOrder(outputs: OutputSelection[]): OutputSelection[] {
  for (let index = 1; index < outputs.length; index++) {
    if (compareLogicalPaths(outputs[index - 1]?.path ?? "", outputs[index]?.path ?? "") > 0) {
      return outputs.sort((a, b) => compareLogicalPaths(a.path, b.path));
    }
  }
  return outputs;
}

function describe(output: OutputSelection): string {
  return output.kind === "source"
    ? `${output.sourcePath} (copy)`
    : `${output.sourcePath} (${output.transform})`;
}

function rejectSharedIndexDirectories(paths: readonly string[]): void {
  const byDir = new Map<string, string[]>();
  for (const path of paths) {
    const dir = posix.dirname(path);
    byDir.set(dir, [...(byDir.get(dir) ?? []), path]);
  }
  for (const [dir, files] of byDir) {
    if (files.length > 1) {
      throw new PublishPlanError(
        `markdown_to_html index mode needs at most one Markdown file per directory, but ${dir === "." ? "the bundle root" : dir} holds ${files.join(", ")}`,
      );
    }
  }
}

/** Adds URLs (when links are configured) and returns the primary URL of the publication. */
export function attachUrls(
  outputs: readonly Omit<PlannedOutput, "url">[],
  bundlePath: string,
  links: LinkPolicy | undefined,
): { outputs: PlannedOutput[]; primaryUrl: string | undefined } {
  if (links === undefined) {
    return { outputs: outputs.map((output) => plannedOutput(output)), primaryUrl: undefined };
  }
  const withUrls = outputs.map((output) =>
    plannedOutput(output, outputUrl(links.baseUrl, join(bundlePath, output.path))),
  );
  return { outputs: withUrls, primaryUrl: selectPrimaryUrl(withUrls, links.primary) };
}

/**
 * A planned output from `fields` (and `url`, when given), built field by field. In V8 a spread
 * followed by more keys (`{ ...output, sha256, size }`) gave most of the objects a hidden class of
 * their own: 20 000 outputs carried about 5 MiB of maps and descriptor arrays. Optional fields
 * absent from `fields` stay absent.
 */
export function plannedOutput(fields: Omit<PlannedOutput, "url">, url?: string): PlannedOutput {
  const output: PlannedOutput = {
    path: fields.path,
    kind: fields.kind,
    sourcePath: fields.sourcePath,
    sha256: fields.sha256,
    size: fields.size,
  };
  if (fields.transform !== undefined) output.transform = fields.transform;
  if (fields.metadata !== undefined) output.metadata = fields.metadata;
  if (fields.decoded !== undefined) output.decoded = fields.decoded;
  if (fields.content !== undefined) output.content = fields.content;
  if (url !== undefined) output.url = url;
  return output;
}
