import { FileHasher, type Manifest, type ManifestFile } from "@distributor/bundle";
import type { DecodedDigest } from "@distributor/state";
import { joinPrefix, SliceClock, type StorageBackend } from "@distributor/storage";
import { encodeBytes, encodedDigest } from "../content/encode.js";
import { MAX_MARKDOWN_BYTES } from "../content/markdown-paths.js";
import { encodingOf } from "../content/metadata.js";
import { RenderCache } from "../content/render-cache.js";
import { verifiedChunks } from "../content/verify-source.js";
import { PublishPlanError } from "./errors.js";
import type { OutputSelection, PlannedOutput } from "./outputs.js";

export interface PrepareOutputsOptions {
  source: StorageBackend;
  sourceBundlePath: string;
  manifest: Manifest;
  cache?: RenderCache | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Gives every selected output the digest and size of the bytes that will be written: source
 * copies take them from the (validated) manifest; generated outputs are rendered now.
 */
export async function prepareOutputs(
  selection: readonly OutputSelection[],
  options: PrepareOutputsOptions,
): Promise<Omit<PlannedOutput, "url">[]> {
  const clock = new SliceClock();
  const files = new Map<string, ManifestFile>();
  for (const file of options.manifest.files) {
    files.set(file.path, file);
    if (files.size % 1024 === 0 && clock.due()) await clock.turn();
  }
  const cache = options.cache ?? new RenderCache();
  const prepared: Omit<PlannedOutput, "url">[] = [];
  for (const output of selection) {
    // Copies take their digest from the manifest, without IO: a million of them is seconds.
    if (clock.due()) await clock.turn();
    const file = files.get(output.sourcePath);
    if (file === undefined) {
      throw new PublishPlanError(
        `output ${output.path} refers to ${output.sourcePath}, which is not in the manifest`,
      );
    }
    const encoding = encodingOf(output.metadata);
    if (output.kind === "source") {
      if (encoding === undefined) {
        prepared.push(withDigest(output, file.sha256, file.size));
        continue;
      }
      // Encoded now only to learn the digest the state will record; the write encodes again.
      const readable = await options.source.openRead(
        joinPrefix(options.sourceBundlePath, output.sourcePath),
        { signal: options.signal },
      );
      try {
        const expected = { path: output.sourcePath, sha256: file.sha256, size: file.size };
        const encoded = await encodedDigest(verifiedChunks(readable, expected), encoding);
        prepared.push(
          withDigest(output, encoded.sha256, encoded.size, undefined, {
            sha256: file.sha256,
            size: file.size,
          }),
        );
      } finally {
        readable.destroy();
      }
      continue;
    }
    const key = RenderCache.key(output.transform ?? "", file.sha256, output.sourcePath);
    const content = await cache.get(key, () =>
      render(options, output.sourcePath, file.sha256, file.size),
    );
    const digest = digestOf(content);
    if (encoding === undefined) {
      prepared.push(withDigest(output, digest.sha256, digest.size, content));
      continue;
    }
    const encoded = await encodeBytes(content, encoding);
    const stored = digestOf(encoded);
    prepared.push(withDigest(output, stored.sha256, stored.size, encoded, digest));
  }
  return prepared;
}

function digestOf(bytes: Uint8Array): { sha256: string; size: number } {
  const hasher = new FileHasher();
  hasher.update(bytes);
  return hasher.digest();
}

async function render(
  options: PrepareOutputsOptions,
  sourcePath: string,
  sha256: string,
  size: number,
): Promise<Uint8Array> {
  if (size > MAX_MARKDOWN_BYTES) {
    throw new PublishPlanError(
      `${sourcePath}: Markdown file of ${size} bytes exceeds the ${MAX_MARKDOWN_BYTES}-byte rendering limit`,
    );
  }
  const bytes = await options.source.readFile(joinPrefix(options.sourceBundlePath, sourcePath), {
    signal: options.signal,
    maxBytes: MAX_MARKDOWN_BYTES,
  });
  const hasher = new FileHasher();
  hasher.update(bytes);
  const digest = hasher.digest();
  if (digest.sha256 !== sha256 || digest.size !== size) {
    throw new PublishPlanError(
      `${sourcePath}: source changed since validation: expected ${sha256}, got ${digest.sha256}`,
    );
  }
  // Loaded on first use: runs that render nothing never pay for the unified/remark modules.
  const { renderMarkdownDocument } = await import("../content/markdown.js");
  const html = renderMarkdownDocument(Buffer.from(bytes).toString("utf8"), sourcePath);
  return Buffer.from(html, "utf8");
}

/**
 * `output` with its digest, built field by field: a spread followed by more keys gave most of
 * 20 000 outputs a V8 hidden class of their own (see `plannedOutput`).
 */
function withDigest(
  output: OutputSelection,
  sha256: string,
  size: number,
  content?: Uint8Array,
  decoded?: DecodedDigest,
): Omit<PlannedOutput, "url"> {
  const prepared: Omit<PlannedOutput, "url"> = {
    path: output.path,
    kind: output.kind,
    sourcePath: output.sourcePath,
    sha256,
    size,
  };
  if (output.transform !== undefined) prepared.transform = output.transform;
  if (output.metadata !== undefined) prepared.metadata = output.metadata;
  if (decoded !== undefined) prepared.decoded = decoded;
  if (content !== undefined) prepared.content = content;
  return prepared;
}
