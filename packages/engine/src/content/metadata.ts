import type { OutputMetadata } from "@distributor/state";
import { join } from "@distributor/storage";
import { compileGlob, type Glob } from "./glob.js";

/** A compression distributor applies before storing an output (`Content-Encoding`). */
export type ContentEncoding = "gzip" | "br";

export const CONTENT_ENCODINGS: readonly ContentEncoding[] = ["gzip", "br"];

/**
 * One `metadata[]` rule of a destination: outputs whose destination path matches `match` are
 * stored with the headers it sets. Rules are tried in order and the first match wins; a rule
 * that sets nothing keeps the paths it matches free of every later rule.
 */
export interface MetadataRule {
  match: string;
  cacheControl?: string;
  /** Replaces the content type the backend would infer from the extension. */
  contentType?: string;
  contentDisposition?: string;
  /** Compress matched outputs so and store them with this `Content-Encoding`. */
  contentEncoding?: ContentEncoding;
}

/** A destination's rules, compiled once. */
export class MetadataRules {
  readonly #rules: { glob: Glob; metadata: OutputMetadata | undefined }[];

  constructor(rules: readonly MetadataRule[]) {
    this.#rules = rules.map((rule) => ({ glob: compileGlob(rule.match), metadata: fields(rule) }));
  }

  /** True when there are no rules: every output is stored as before metadata existed. */
  get empty(): boolean {
    return this.#rules.length === 0;
  }

  /**
   * The metadata of the output stored at `bundlePath`/`path`: the first rule whose pattern
   * matches the path below the destination root decides; none matching means none.
   */
  for(bundlePath: string, path: string): OutputMetadata | undefined {
    if (this.#rules.length === 0) return undefined;
    const target = join(bundlePath, path);
    for (const rule of this.#rules) {
      if (rule.glob.matches(target)) return rule.metadata;
    }
    return undefined;
  }
}

function fields(rule: MetadataRule): OutputMetadata | undefined {
  const metadata: OutputMetadata = {};
  if (rule.cacheControl !== undefined) metadata.cacheControl = rule.cacheControl;
  if (rule.contentType !== undefined) metadata.contentType = rule.contentType;
  if (rule.contentDisposition !== undefined) metadata.contentDisposition = rule.contentDisposition;
  if (rule.contentEncoding !== undefined) metadata.contentEncoding = rule.contentEncoding;
  return Object.keys(metadata).length === 0 ? undefined : metadata;
}

/** True when two metadata values set the same fields to the same values (absent = none). */
export function sameMetadata(
  a: OutputMetadata | undefined,
  b: OutputMetadata | undefined,
): boolean {
  return (
    a?.cacheControl === b?.cacheControl &&
    a?.contentType === b?.contentType &&
    a?.contentDisposition === b?.contentDisposition &&
    a?.contentEncoding === b?.contentEncoding
  );
}

/** The encoding `metadata` asks distributor to apply, when it is one distributor applies. */
export function encodingOf(metadata: OutputMetadata | undefined): ContentEncoding | undefined {
  const encoding = metadata?.contentEncoding;
  return encoding === "gzip" || encoding === "br" ? encoding : undefined;
}

/** The write options storing `metadata` with an output (none when it has none). */
export function metadataOptions(metadata: OutputMetadata | undefined): {
  contentType?: string;
  cacheControl?: string;
  contentDisposition?: string;
  contentEncoding?: string;
} {
  if (metadata === undefined) return {};
  const options: ReturnType<typeof metadataOptions> = {};
  if (metadata.contentType !== undefined) options.contentType = metadata.contentType;
  if (metadata.cacheControl !== undefined) options.cacheControl = metadata.cacheControl;
  if (metadata.contentDisposition !== undefined) {
    options.contentDisposition = metadata.contentDisposition;
  }
  if (metadata.contentEncoding !== undefined) options.contentEncoding = metadata.contentEncoding;
  return options;
}
