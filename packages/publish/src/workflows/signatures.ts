import { readFile } from "node:fs/promises";
import {
  AllowedSignersError,
  type BundleIssueCode,
  BundleValidationError,
  parseAllowedSigners,
  type SignaturePolicy,
} from "@distributor/bundle";
import type { PipelineConfig } from "../config/types.js";
import { WorkflowError } from "./shared.js";

/** Larger than any allowed_signers file a team keeps; a bound on what is read into memory. */
const MAX_ALLOWED_SIGNERS_BYTES = 4 * 1024 * 1024;

/** The codes a refused signature carries (SPEC §13), kept as they are wherever it is reported. */
export const SIGNATURE_CODES: ReadonlySet<BundleIssueCode | "bundle_invalid"> = new Set([
  "signature_missing",
  "signature_invalid",
  "signer_not_allowed",
]);

/** The signature code of a bundle refused for its signature alone, else undefined. */
export function signatureCode(error: unknown): string | undefined {
  if (!(error instanceof BundleValidationError)) return undefined;
  return SIGNATURE_CODES.has(error.code) ? error.code : undefined;
}

/**
 * The signature policy of a pipeline's source (`source.signatures`), its allowed_signers file read
 * now so that a rotated key is trusted without a restart; undefined when none is configured. A
 * file that cannot be read or parsed fails as `config_invalid`, naming the key, the file and the
 * line.
 */
export async function signaturePolicy(
  pipeline: PipelineConfig,
  options: { now?: (() => Date) | undefined; signal?: AbortSignal | undefined } = {},
): Promise<SignaturePolicy | undefined> {
  const config = pipeline.source.signatures;
  if (config === undefined) return undefined;
  const path = config.allowedSigners;
  // Reports name the pipeline already (`pipeline reports: ...`).
  const subject = "source.signatures.allowed_signers";
  let text: string;
  try {
    const bytes = await readFile(path, { signal: options.signal });
    if (bytes.length > MAX_ALLOWED_SIGNERS_BYTES) {
      throw new Error(`larger than ${MAX_ALLOWED_SIGNERS_BYTES} bytes`);
    }
    text = bytes.toString("utf8");
  } catch (error) {
    if (options.signal?.aborted) throw error;
    const detail = error instanceof Error ? error.message : String(error);
    throw new WorkflowError("config_invalid", `${subject}: cannot read ${path}: ${detail}`, {
      cause: error,
    });
  }
  try {
    const allowedSigners = parseAllowedSigners(text, path);
    const policy: SignaturePolicy = {
      required: config.required,
      namespace: config.namespace,
      allowedSigners,
      allowedSignersSource: path,
    };
    if (options.now !== undefined) policy.now = options.now();
    return policy;
  } catch (error) {
    if (!(error instanceof AllowedSignersError)) throw error;
    throw new WorkflowError("config_invalid", `${subject}: ${error.message}`, { cause: error });
  }
}
