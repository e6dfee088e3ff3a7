import {
  displayPath,
  isStorageError,
  joinPrefix,
  runInSlices,
  type StorageBackend,
} from "@distributor/storage";
import { type BundleIssue, BundleValidationError } from "../errors.js";
import { storageDetail } from "../file-problem.js";
import { MANIFEST_FILE_NAME, SIGNATURE_FILE_NAME } from "../manifest-checks.js";
import type { Manifest } from "../manifest-types.js";
import {
  parseManifestBytesSteps,
  type ReadManifestOptions,
  readManifestBytes,
} from "../read-manifest.js";
import { type AllowedSigner, findAllowedSigner } from "./allowed-signers.js";
import { SshWireError } from "./ssh-wire.js";
import { parseSshSignature, type SshSignature, sshsigProblem } from "./sshsig.js";

/** The SSHSIG namespace bundles are signed in unless configured otherwise. */
export const DEFAULT_SIGNATURE_NAMESPACE = "distributor";
/** Armored signatures are a few kilobytes; anything larger is not one. */
const MAX_SIGNATURE_BYTES = 64 * 1024;

/** How a pipeline's bundles must be signed (`source.signatures`). */
export interface SignaturePolicy {
  /** Refuse a bundle without `manifest.json.sig`; a present signature is checked either way. */
  required: boolean;
  /** The SSHSIG namespace signatures must be made in (`ssh-keygen -Y sign -n`). */
  namespace: string;
  allowedSigners: readonly AllowedSigner[];
  /** Names the allowed signers in messages, e.g. the file's path. */
  allowedSignersSource: string;
  /** The time `valid-after` / `valid-before` are checked at; default now, as OpenSSH does. */
  now?: Date;
}

/** Who signed a bundle's manifest: the allowed_signers line that trusts the key. */
export interface BundleSigner {
  /** The principals field of that line. */
  principal: string;
  /** `SHA256:...` as `ssh-keygen -l` prints it. */
  fingerprint: string;
  keyType: string;
}

export type SignatureCheck =
  | { ok: true; signer: BundleSigner | undefined }
  | { ok: false; issue: BundleIssue };

/**
 * Checks a manifest's detached signature under `policy`: present (when required), a valid SSHSIG
 * signature over exactly `manifest` in the policy's namespace, by a key an allowed_signers line
 * trusts for that namespace now. `signature` is undefined when there is no signature file. Pure.
 */
export function checkManifestSignature(
  manifest: Uint8Array,
  signature: Uint8Array | undefined,
  policy: SignaturePolicy,
): SignatureCheck {
  if (signature === undefined) {
    if (!policy.required) return { ok: true, signer: undefined };
    return refuse(
      "signature_missing",
      `${SIGNATURE_FILE_NAME}: missing; the pipeline requires ${MANIFEST_FILE_NAME} signed by a key in ${policy.allowedSignersSource} (ssh-keygen -Y sign -n ${policy.namespace})`,
    );
  }
  let parsed: SshSignature;
  try {
    parsed = parseSshSignature(signature);
  } catch (error) {
    if (!(error instanceof SshWireError)) throw error;
    return refuse(
      "signature_invalid",
      `${SIGNATURE_FILE_NAME}: not an SSH signature: it ${error.message}`,
    );
  }
  const key = `${parsed.keyType} key ${parsed.fingerprint}`;
  const problem = sshsigProblem(parsed, manifest, policy.namespace);
  if (problem !== undefined) {
    return refuse(
      "signature_invalid",
      `${SIGNATURE_FILE_NAME}: signature by ${key} is not valid for ${MANIFEST_FILE_NAME}: ${problem}`,
      parsed.fingerprint,
    );
  }
  const now = policy.now ?? new Date();
  const found = findAllowedSigner(policy.allowedSigners, parsed.keyBlob, policy.namespace, now);
  if (found.allowed === undefined) {
    return refuse(
      "signer_not_allowed",
      `${SIGNATURE_FILE_NAME}: signed by ${key}, which ${policy.allowedSignersSource} does not allow: ${found.reason}`,
      parsed.fingerprint,
    );
  }
  return {
    ok: true,
    signer: {
      principal: found.allowed.principals,
      fingerprint: parsed.fingerprint,
      keyType: parsed.keyType,
    },
  };
}

function refuse(
  code: "signature_missing" | "signature_invalid" | "signer_not_allowed",
  message: string,
  fingerprint?: string,
): SignatureCheck {
  const issue: BundleIssue = { code, path: SIGNATURE_FILE_NAME, message };
  if (fingerprint !== undefined) issue.actual = fingerprint;
  return { ok: false, issue };
}

export interface SignedManifest {
  manifest: Manifest;
  /** Undefined when the bundle carries no signature and the policy does not require one. */
  signer: BundleSigner | undefined;
}

/**
 * Reads a bundle's manifest and its signature and checks them under `policy` before parsing the
 * manifest: the manifest returned is parsed from exactly the bytes the signature covers. A
 * refused signature is a `BundleValidationError` with one issue (`signature_missing`,
 * `signature_invalid`, `signer_not_allowed`); other failures are `readManifest`'s.
 */
export async function readSignedManifest(
  backend: StorageBackend,
  bundlePath: string,
  policy: SignaturePolicy,
  options: Pick<ReadManifestOptions, "signal" | "maxFiles" | "maxFilesName"> = {},
): Promise<SignedManifest> {
  const bytes = await readManifestBytes(backend, bundlePath, options);
  const signature = await readSignature(backend, bundlePath, options.signal);
  const check =
    "issue" in signature
      ? ({ ok: false, issue: signature.issue } as const)
      : checkManifestSignature(bytes, signature.bytes, policy);
  if (!check.ok) throw new BundleValidationError([check.issue], { bundlePath });
  const manifest = await runInSlices(
    parseManifestBytesSteps(bytes, displayPath(joinPrefix(bundlePath, MANIFEST_FILE_NAME))),
  );
  return { manifest, signer: check.signer };
}

/** The signature file's bytes, undefined when there is none, or why it cannot be one. */
async function readSignature(
  backend: StorageBackend,
  bundlePath: string,
  signal: AbortSignal | undefined,
): Promise<{ bytes: Uint8Array | undefined } | { issue: BundleIssue }> {
  try {
    const bytes = await backend.readFile(joinPrefix(bundlePath, SIGNATURE_FILE_NAME), {
      maxBytes: MAX_SIGNATURE_BYTES,
      signal,
    });
    return { bytes };
  } catch (error) {
    if (isStorageError(error, "not_found")) return { bytes: undefined };
    const detail = isStorageError(error, "unsupported")
      ? `not a regular file: ${storageDetail(error)}`
      : isStorageError(error, "limit_exceeded")
        ? `larger than ${MAX_SIGNATURE_BYTES} bytes, so not an SSH signature`
        : undefined;
    if (detail === undefined) throw error;
    const issue: BundleIssue = {
      code: "signature_invalid",
      path: SIGNATURE_FILE_NAME,
      message: `${SIGNATURE_FILE_NAME}: ${detail}`,
    };
    return { issue };
  }
}
