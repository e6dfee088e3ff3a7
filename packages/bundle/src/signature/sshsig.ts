import { createHash } from "node:crypto";
import { parseSshPublicKey, sshFingerprint, sshSignatureProblem } from "./public-key.js";
import { SshReader, SshWireError, sshStrings } from "./ssh-wire.js";

/*
 * OpenSSH's SSHSIG format (PROTOCOL.sshsig), as `ssh-keygen -Y sign` writes it and `ssh-keygen -Y
 * verify` checks it. Why it is written here rather than taken from a package: docs/decisions.md.
 */

const MAGIC = new TextEncoder().encode("SSHSIG");
const SUPPORTED_VERSION = 1;
const BEGIN = "-----BEGIN SSH SIGNATURE-----";
const END = "-----END SSH SIGNATURE-----";
const HASH_ALGORITHMS = ["sha256", "sha512"] as const;

export type SshsigHashAlgorithm = (typeof HASH_ALGORITHMS)[number];

/** A parsed SSHSIG blob; the signing key is read but not yet trusted or checked. */
export interface SshSignature {
  /** The signing key's wire encoding, and its fingerprint as `ssh-keygen -l` prints it. */
  keyBlob: Uint8Array;
  fingerprint: string;
  /** The key type the blob names (`ssh-ed25519`, ...), supported or not. */
  keyType: string;
  namespace: string;
  hashAlgorithm: SshsigHashAlgorithm;
  /** The SSH signature blob: `string` algorithm, `string` signature. */
  signature: Uint8Array;
}

/**
 * Reads an armored SSH signature (`-----BEGIN SSH SIGNATURE-----`, base64, `-----END SSH
 * SIGNATURE-----`). Throws `SshWireError` saying what is wrong with it.
 */
export function parseSshSignature(armored: Uint8Array | string): SshSignature {
  return parseSshsigBlob(dearmor(armored));
}

/** The bytes inside the armour. As OpenSSH does, the file must start with the header line. */
export function dearmor(armored: Uint8Array | string): Uint8Array {
  const text = typeof armored === "string" ? armored : Buffer.from(armored).toString("latin1");
  const header = /^-----BEGIN SSH SIGNATURE-----\r?\n/.exec(text);
  if (header === null) throw new SshWireError(`does not start with ${BEGIN}`);
  const end = text.indexOf(`\n${END}`, header[0].length - 1);
  if (end < 0) throw new SshWireError(`has no ${END} line`);
  const body = text.slice(header[0].length, end).replace(/[ \t\r\n]/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0) {
    throw new SshWireError("holds something other than base64 between its armour lines");
  }
  return Buffer.from(body, "base64");
}

/** Reads an SSHSIG blob (PROTOCOL.sshsig §2). */
export function parseSshsigBlob(blob: Uint8Array): SshSignature {
  const reader = new SshReader(blob);
  const magic = reader.raw(MAGIC.length, "SSHSIG preamble");
  if (!magic.every((byte, index) => byte === MAGIC[index])) {
    throw new SshWireError("is not an SSHSIG signature (no SSHSIG preamble)");
  }
  const version = reader.uint32("SSHSIG version");
  if (version > SUPPORTED_VERSION) {
    throw new SshWireError(
      `is SSHSIG version ${version}, newer than the supported version ${SUPPORTED_VERSION}`,
    );
  }
  // OpenSSH only refuses newer versions; no signer ever wrote version 0, so a 0 here is damage
  // (the version is not covered by the signature) and is refused rather than verified.
  if (version < SUPPORTED_VERSION) {
    throw new SshWireError(
      `is SSHSIG version ${version}; version ${SUPPORTED_VERSION} is the first`,
    );
  }
  const keyBlob = reader.string("public key");
  const namespace = reader.text("namespace");
  reader.string("reserved field");
  const hashAlgorithm = reader.text("hash algorithm");
  const signature = reader.string("signature");
  reader.end("SSHSIG signature");
  if (!(HASH_ALGORITHMS as readonly string[]).includes(hashAlgorithm)) {
    throw new SshWireError(
      `uses hash algorithm ${JSON.stringify(hashAlgorithm)}; only sha256 and sha512 are allowed`,
    );
  }
  return {
    keyBlob,
    fingerprint: sshFingerprint(keyBlob),
    keyType: new SshReader(keyBlob).text("key type"),
    namespace,
    hashAlgorithm: hashAlgorithm as SshsigHashAlgorithm,
    signature,
  };
}

/**
 * The bytes an SSHSIG signature signs (PROTOCOL.sshsig §3): the preamble, the namespace, an empty
 * reserved field, the hash algorithm and H(message). The reserved field is always empty here, as
 * OpenSSH verifies it, whatever the blob carries.
 */
export function sshsigSignedData(
  namespace: string,
  hashAlgorithm: SshsigHashAlgorithm,
  message: Uint8Array,
): Uint8Array {
  const digest = createHash(hashAlgorithm).update(message).digest();
  const fields = sshStrings([namespace, new Uint8Array(0), hashAlgorithm, digest]);
  const data = new Uint8Array(MAGIC.length + fields.length);
  data.set(MAGIC);
  data.set(fields, MAGIC.length);
  return data;
}

/**
 * Why `signature` is not a valid signature of `message` in `namespace` by the key it names, or
 * undefined when it is (`ssh-keygen -Y check-novalidate`: nothing here says the key is trusted).
 */
export function sshsigProblem(
  signature: SshSignature,
  message: Uint8Array,
  namespace: string,
): string | undefined {
  if (signature.namespace !== namespace) {
    return `it was made for namespace ${JSON.stringify(signature.namespace)}, not ${JSON.stringify(namespace)}`;
  }
  try {
    const key = parseSshPublicKey(signature.keyBlob);
    const data = sshsigSignedData(namespace, signature.hashAlgorithm, message);
    return sshSignatureProblem(key, data, signature.signature);
  } catch (error) {
    if (error instanceof SshWireError) return error.message;
    throw error;
  }
}
