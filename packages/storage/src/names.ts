import { randomBytes } from "node:crypto";
import { pathProblem } from "./paths.js";

/** Name of the state file distributor keeps in every destination bundle path. */
export const STATE_FILE_NAME = ".distributor.json";
/** Name of the lease (and journal) a writing run holds beside a state file (SPEC §5). */
export const LEASE_FILE_NAME = ".distributor.lease.json";

const TEMP_NAME = /^\.distributor\.[0-9a-f]{12}\.tmp$/;

/** A fresh name for the temp file an atomic write streams into before moving it into place. */
export function tempFileName(): string {
  return `.distributor.${randomBytes(6).toString("hex")}.tmp`;
}

/** True for a name an atomic write uses for its temp file. */
export function isTempFileName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/**
 * True for the names distributor keeps for itself: the state file, the lease and temp files.
 * Bundles may not hold them at any depth, and publications never write them as outputs.
 */
export function isReservedName(name: string): boolean {
  return name === STATE_FILE_NAME || name === LEASE_FILE_NAME || isTempFileName(name);
}

/** The first segment of a logical path that is a reserved name, if any. */
export function reservedSegment(path: string): string | undefined {
  return path.split("/").find(isReservedName);
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Why a stored name (raw bytes, as the filesystem holds it) cannot be a logical path segment,
 * or undefined when it can. Names that are not UTF-8 are the case string APIs silently mangle.
 */
export function nameProblem(name: Uint8Array): string | undefined {
  let text: string;
  try {
    text = strictUtf8.decode(name);
  } catch {
    return "name is not valid UTF-8";
  }
  return pathProblem(text)?.replace(/^path/, "name");
}

/**
 * A stored name as people read it: printable UTF-8 stays, a backslash becomes `\\`, and control
 * characters and bytes that are not UTF-8 become `\xNN`. The result of a name with a problem
 * always holds a backslash, so it is never mistaken for a valid logical path.
 */
export function escapeName(name: Uint8Array): string {
  const bytes = Buffer.from(name.buffer, name.byteOffset, name.byteLength);
  let out = "";
  let index = 0;
  while (index < bytes.length) {
    const length = utf8SequenceLength(bytes, index);
    if (length === 0) {
      out += `\\x${hex(bytes[index] as number)}`;
      index += 1;
      continue;
    }
    const char = bytes.toString("utf8", index, index + length);
    const code = char.codePointAt(0) ?? 0;
    if (char === "\\") out += "\\\\";
    else if (code < 0x20 || code === 0x7f) out += `\\x${hex(code)}`;
    else out += char;
    index += length;
  }
  return out;
}

function hex(byte: number): string {
  return byte.toString(16).padStart(2, "0");
}

/** Length of the well-formed UTF-8 sequence starting at `index`, or 0 when it is not one. */
function utf8SequenceLength(bytes: Buffer, index: number): number {
  const first = bytes[index] as number;
  if (first < 0x80) return 1;
  const length =
    first >= 0xc2 && first <= 0xdf
      ? 2
      : first >= 0xe0 && first <= 0xef
        ? 3
        : first >= 0xf0 && first <= 0xf4
          ? 4
          : 0;
  if (length === 0 || index + length > bytes.length) return 0;
  try {
    strictUtf8.decode(bytes.subarray(index, index + length));
    return length;
  } catch {
    return 0;
  }
}
