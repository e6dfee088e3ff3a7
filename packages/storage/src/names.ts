import { createHash, randomBytes } from "node:crypto";
import { join, pathProblem } from "./paths.js";

/** Name of the state file distributor keeps in every destination bundle path. */
export const STATE_FILE_NAME = ".distributor.json";
/** Name of the lease (and journal) a writing run holds beside a state file (docs/design/commit-protocol.md). */
export const LEASE_FILE_NAME = ".distributor.lease.json";

/** Logical path of the state file for a destination bundle path. */
export function statePath(bundlePath: string): string {
  return join(bundlePath, STATE_FILE_NAME);
}

const TEMP_NAME = /^\.distributor\.[0-9a-f]{16}\.tmp$/;
const TARGET_TAG_LENGTH = 6;

/** Six hex digits naming the target a temp file belongs to. */
function targetTag(targetName: string): string {
  return createHash("sha256").update(targetName).digest("hex").slice(0, TARGET_TAG_LENGTH);
}

/**
 * A fresh name for the temp file an atomic write of `targetName` streams into before moving it
 * into place: `.distributor.<tag of the target><random>.tmp`, 16 hex digits in all, so that
 * recovery can tell a lease being written by a concurrent run from debris.
 */
export function tempFileName(targetName: string): string {
  return `.distributor.${targetTag(targetName)}${nextTempSuffix()}.tmp`;
}

/**
 * 40 bits that differ for every temp name this process makes: a random start, then a counter.
 * Other processes start elsewhere, and an exclusive create refuses the rare clash anyway; one
 * random draw per process instead of one per file keeps a thousand-file publish off the RNG.
 */
let tempCounter: number | undefined;
function nextTempSuffix(): string {
  tempCounter ??= randomBytes(5).readUIntBE(0, 5);
  tempCounter = (tempCounter + 1) % 2 ** 40;
  return tempCounter.toString(16).padStart(10, "0");
}

/**
 * The one lock name per target that a compare-and-swap holds while it checks and renames
 * (same pattern and target tag as the temp files, so leftovers are recognised as debris).
 */
export function swapLockName(targetName: string): string {
  const rest = createHash("sha256").update(`swap:${targetName}`).digest("hex");
  return `.distributor.${targetTag(targetName)}${rest.slice(0, 10)}.tmp`;
}

/**
 * The name a waiter creates exclusively before it breaks a stale swap lock of `targetName`, so
 * that of several waiters judging one lock stale exactly one breaks it (and a fresh lock taken
 * meanwhile is never removed by a waiter that looked earlier).
 */
export function swapBreakerName(targetName: string): string {
  const rest = createHash("sha256").update(`break:${targetName}`).digest("hex");
  return `.distributor.${targetTag(targetName)}${rest.slice(0, 10)}.tmp`;
}

/** True for a name an atomic write uses for its temp file (or a compare-and-swap for its lock). */
export function isTempFileName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/** True for a temp file (or swap lock) of a write of `targetName`. */
export function isTempFileFor(name: string, targetName: string): boolean {
  return (
    isTempFileName(name) && name.slice(".distributor.".length).startsWith(targetTag(targetName))
  );
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
