import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto";
import { SshReader, SshWireError } from "./ssh-wire.js";

/** Key types whose signatures distributor verifies, as OpenSSH names them. */
export const SSH_KEY_TYPES = [
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa",
] as const;

export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

/** OpenSSH refuses RSA keys below this many bits (`SSH_RSA_MINIMUM_MODULUS_SIZE`). */
const RSA_MINIMUM_BITS = 1024;

/** Curve, coordinate size and digest of each ECDSA key type (RFC 5656 §6.2.1). */
const CURVES = {
  "ecdsa-sha2-nistp256": { name: "nistp256", jwk: "P-256", size: 32, digest: "sha256" },
  "ecdsa-sha2-nistp384": { name: "nistp384", jwk: "P-384", size: 48, digest: "sha384" },
  "ecdsa-sha2-nistp521": { name: "nistp521", jwk: "P-521", size: 66, digest: "sha512" },
} as const;

type EcdsaKeyType = keyof typeof CURVES;

/** RSA signature algorithms SSHSIG allows (never the SHA-1 `ssh-rsa`), and their digests. */
const RSA_SIGNATURE_DIGESTS: Readonly<Record<string, string>> = {
  "rsa-sha2-256": "sha256",
  "rsa-sha2-512": "sha512",
};

/** An SSH public key: its wire encoding, what `ssh-keygen -l` calls it, and Node's key object. */
export interface SshPublicKey {
  type: SshKeyType;
  /** The key's wire encoding (RFC 4253 §6.6), as allowed_signers files carry it in base64. */
  blob: Uint8Array;
  /** `SHA256:` and the unpadded base64 of the blob's SHA-256, as `ssh-keygen -l` prints it. */
  fingerprint: string;
  key: KeyObject;
  /** The modulus size of an RSA key; absent for others. */
  bits?: number;
}

export function isSshKeyType(type: string): type is SshKeyType {
  return (SSH_KEY_TYPES as readonly string[]).includes(type);
}

/** The fingerprint `ssh-keygen -l` prints for a key blob. */
export function sshFingerprint(blob: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/**
 * Reads a public key blob. Throws `SshWireError` naming the problem for a malformed blob or a key
 * type distributor does not verify (certificates, security keys, DSA).
 */
export function parseSshPublicKey(blob: Uint8Array): SshPublicKey {
  const reader = new SshReader(blob);
  const type = reader.text("key type");
  if (!isSshKeyType(type)) {
    throw new SshWireError(
      `key type ${JSON.stringify(type)} is not supported (supported: ${SSH_KEY_TYPES.join(", ")})`,
    );
  }
  const fingerprint = sshFingerprint(blob);
  if (type === "ssh-ed25519") {
    const x = reader.string("ed25519 key");
    if (x.length !== 32) throw new SshWireError("ed25519 key is not 32 bytes");
    reader.end("public key");
    return { type, blob, fingerprint, key: jwkKey({ kty: "OKP", crv: "Ed25519", x: b64url(x) }) };
  }
  if (type === "ssh-rsa") {
    const e = reader.unsignedMpint("RSA exponent");
    const n = reader.unsignedMpint("RSA modulus");
    reader.end("public key");
    const bits = bitLength(n);
    if (bits < RSA_MINIMUM_BITS) {
      throw new SshWireError(`RSA key of ${bits} bits is smaller than ${RSA_MINIMUM_BITS} bits`);
    }
    const key = jwkKey({ kty: "RSA", n: b64url(n), e: b64url(e) });
    return { type, blob, fingerprint, key, bits };
  }
  const curve = CURVES[type];
  const name = reader.text("curve name");
  if (name !== curve.name) {
    throw new SshWireError(`${type} key names curve ${JSON.stringify(name)}`);
  }
  const point = reader.string("ECDSA point");
  reader.end("public key");
  if (point.length !== 1 + 2 * curve.size || point[0] !== 0x04) {
    throw new SshWireError(`ECDSA point is not an uncompressed ${curve.name} point`);
  }
  const x = point.subarray(1, 1 + curve.size);
  const y = point.subarray(1 + curve.size);
  return {
    type,
    blob,
    fingerprint,
    key: jwkKey({ kty: "EC", crv: curve.jwk, x: b64url(x), y: b64url(y) }),
  };
}

/**
 * Checks an SSH signature blob (`string` algorithm, `string` signature: RFC 4253 §6.6, RFC 5656
 * §3.1.2, RFC 8332 §3) over `data` with `key`. Returns why it does not verify, or undefined when it
 * does. A malformed blob throws `SshWireError`.
 */
export function sshSignatureProblem(
  key: SshPublicKey,
  data: Uint8Array,
  signatureBlob: Uint8Array,
): string | undefined {
  const reader = new SshReader(signatureBlob);
  const algorithm = reader.text("signature algorithm");
  if (key.type === "ssh-rsa") {
    const digest = RSA_SIGNATURE_DIGESTS[algorithm];
    if (digest === undefined) {
      return `RSA signature algorithm ${JSON.stringify(algorithm)} is not allowed (only rsa-sha2-256 and rsa-sha2-512)`;
    }
    const signature = reader.string("RSA signature");
    reader.end("signature");
    const size = Math.ceil((key.bits ?? 0) / 8);
    if (signature.length > size) return "RSA signature is longer than the key's modulus";
    return checked(() => verify(digest, data, key.key, leftPad(signature, size)));
  }
  if (algorithm !== key.type) {
    return `signature algorithm ${JSON.stringify(algorithm)} does not match the ${key.type} key`;
  }
  if (key.type === "ssh-ed25519") {
    const signature = reader.string("ed25519 signature");
    reader.end("signature");
    if (signature.length !== 64) return "ed25519 signature is not 64 bytes";
    return checked(() => verify(null, data, key.key, signature));
  }
  const curve = CURVES[key.type as EcdsaKeyType];
  const inner = new SshReader(reader.string("ECDSA signature"));
  reader.end("signature");
  const r = inner.unsignedMpint("ECDSA r");
  const s = inner.unsignedMpint("ECDSA s");
  inner.end("ECDSA signature");
  if (r.length > curve.size || s.length > curve.size) {
    return "ECDSA signature values are larger than the curve";
  }
  const signature = new Uint8Array(2 * curve.size);
  signature.set(r, curve.size - r.length);
  signature.set(s, 2 * curve.size - s.length);
  return checked(() =>
    verify(curve.digest, data, { key: key.key, dsaEncoding: "ieee-p1363" }, signature),
  );
}

function checked(verifies: () => boolean): string | undefined {
  let ok: boolean;
  try {
    ok = verifies();
  } catch {
    // OpenSSL refuses some malformed signatures outright instead of answering false.
    ok = false;
  }
  return ok ? undefined : "the signature does not verify";
}

function jwkKey(jwk: Record<string, string>): KeyObject {
  try {
    return createPublicKey({ key: jwk, format: "jwk" });
  } catch (error) {
    // An ECDSA point off its curve, say.
    throw new SshWireError(`not a usable public key: ${(error as Error).message}`);
  }
}

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

function bitLength(magnitude: Uint8Array): number {
  if (magnitude.length === 0) return 0;
  return (magnitude.length - 1) * 8 + (32 - Math.clz32(magnitude[0]!));
}

function leftPad(bytes: Uint8Array, size: number): Uint8Array {
  if (bytes.length >= size) return bytes;
  const padded = new Uint8Array(size);
  padded.set(bytes, size - bytes.length);
  return padded;
}
