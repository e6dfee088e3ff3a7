import { readFile } from "node:fs/promises";
import {
  AllowedSignersError,
  BundleValidationError,
  DEFAULT_SIGNATURE_NAMESPACE,
  parseAllowedSigners,
  type SignaturePolicy,
} from "@distributor/bundle";
import type { PipelineConfig } from "../config/types.js";
import { SIGNATURE_CODES, WorkflowError } from "../errors.js";

/** Larger than any allowed_signers file a team keeps; a bound on what is read into memory. */
const MAX_ALLOWED_SIGNERS_BYTES = 4 * 1024 * 1024;

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
  // Reports name the pipeline already (`pipeline reports: ...`).
  return readSignaturePolicy(
    { ...config, subject: "source.signatures.allowed_signers", code: "config_invalid" },
    options,
  );
}

/**
 * A signature policy from an allowed_signers file named outside any configuration (`validate
 * --allowed-signers`): a present signature must hold, and with `required` a missing one fails.
 */
export function allowedSignersPolicy(
  file: { allowedSigners: string; namespace?: string | undefined; required: boolean },
  options: { signal?: AbortSignal | undefined } = {},
): Promise<SignaturePolicy> {
  return readSignaturePolicy(
    {
      allowedSigners: file.allowedSigners,
      namespace: file.namespace ?? DEFAULT_SIGNATURE_NAMESPACE,
      required: file.required,
      subject: "--allowed-signers",
      code: "allowed_signers_invalid",
    },
    options,
  );
}

async function readSignaturePolicy(
  config: {
    allowedSigners: string;
    namespace: string;
    required: boolean;
    /** What messages name the file by. */
    subject: string;
    /** The code an unreadable or unparsable file fails with. */
    code: string;
  },
  options: { now?: (() => Date) | undefined; signal?: AbortSignal | undefined },
): Promise<SignaturePolicy> {
  const { allowedSigners: path, subject, code } = config;
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
    throw new WorkflowError(code, `${subject}: cannot read ${path}: ${detail}`, {
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
    throw new WorkflowError(code, `${subject}: ${error.message}`, { cause: error });
  }
}
