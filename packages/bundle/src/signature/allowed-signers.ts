import { isSshKeyType, parseSshPublicKey, type SshPublicKey } from "./public-key.js";
import { SshWireError } from "./ssh-wire.js";

/*
 * OpenSSH's allowed_signers format (ssh-keygen(1) "ALLOWED SIGNERS"), one signer a line:
 *
 *   principals [options] keytype base64-key [comment]
 *
 * Options are `namespaces="a,b"`, `valid-after="YYYYMMDD[HHMM[SS]][Z]"`, `valid-before=...` and
 * `cert-authority`, which distributor refuses (it verifies plain keys, not certificates). A line
 * OpenSSH would reject is an error naming the file and the line, never a line silently skipped.
 */

/** One line of an allowed_signers file. */
export interface AllowedSigner {
  /** The principals field as written: `alice@example.com`, `alice,bob` or a pattern list. */
  principals: string;
  key: SshPublicKey;
  /** `namespaces=`: the pattern list of namespaces this key may sign for; absent for any. */
  namespaces?: string;
  /** `valid-after=` / `valid-before=`: the key is trusted only in between. */
  validAfter?: Date;
  validBefore?: Date;
  /** 1-based line number in its file. */
  line: number;
}

/** An allowed_signers file that cannot be used; the message names the file and the line. */
export class AllowedSignersError extends Error {
  override name = "AllowedSignersError";
  constructor(
    readonly source: string,
    readonly line: number,
    detail: string,
  ) {
    super(`${source}:${line}: ${detail}`);
  }
}

/** Parses an allowed_signers file; `source` names it in errors (`/etc/distributor/allowed_signers`). */
export function parseAllowedSigners(text: string, source: string): AllowedSigner[] {
  const signers: AllowedSigner[] = [];
  const lines = text.split("\n");
  for (const [index, raw] of lines.entries()) {
    const line = raw.replace(/\r$/, "").trim();
    if (line === "" || line.startsWith("#")) continue;
    try {
      signers.push(parseLine(line, index + 1));
    } catch (error) {
      if (error instanceof LineError)
        throw new AllowedSignersError(source, index + 1, error.message);
      throw error;
    }
  }
  return signers;
}

class LineError extends Error {}

function parseLine(line: string, lineNumber: number): AllowedSigner {
  const cursor = { text: line };
  const principals = nextToken(cursor, { quoted: true });
  if (principals === "") throw new LineError("empty principals");
  let token = nextToken(cursor, { quoted: false });
  let options: SignerOptions = {};
  if (isOptions(token)) {
    options = parseOptions(token);
    token = nextToken(cursor, { quoted: false });
  }
  if (token === "") throw new LineError("missing key");
  const encoded = nextToken(cursor, { quoted: false });
  const key = parseKey(token, encoded);
  return { principals, key, ...options, line: lineNumber };
}

/** Reads the next whitespace-separated token; with `quoted`, a leading `"` runs to the next `"`. */
function nextToken(cursor: { text: string }, { quoted }: { quoted: boolean }): string {
  const text = cursor.text.trimStart();
  if (quoted && text.startsWith('"')) {
    const close = text.indexOf('"', 1);
    if (close < 0) throw new LineError("principals have no closing quote");
    cursor.text = text.slice(close + 1);
    return text.slice(1, close);
  }
  // Options may hold quoted spaces (`namespaces="a b"` is no namespace, but it is one token).
  let end = 0;
  let inQuotes = false;
  while (end < text.length) {
    const char = text[end]!;
    if (char === '"') inQuotes = !inQuotes;
    else if (!inQuotes && (char === " " || char === "\t")) break;
    end++;
  }
  cursor.text = text.slice(end);
  return text.slice(0, end);
}

/** Key types never hold `=`; options always do, except the flag `cert-authority`. */
function isOptions(token: string): boolean {
  return token.includes("=") || /^cert-authority(,|$)/i.test(token);
}

interface SignerOptions {
  namespaces?: string;
  validAfter?: Date;
  validBefore?: Date;
}

function parseOptions(text: string): SignerOptions {
  const options: SignerOptions = {};
  let rest = text;
  while (rest !== "") {
    const name = /^[A-Za-z-]+/.exec(rest)?.[0] ?? "";
    const key = name.toLowerCase();
    rest = rest.slice(name.length);
    if (key === "cert-authority") {
      throw new LineError(
        "cert-authority is not supported: distributor verifies signatures by plain keys, not certificates; list each signer's public key instead",
      );
    }
    if (!["namespaces", "valid-after", "valid-before"].includes(key) || !rest.startsWith("=")) {
      throw new LineError(`unknown option ${JSON.stringify(name + rest.split(",")[0])}`);
    }
    const [value, after] = dequote(rest.slice(1), key);
    rest = after;
    if (key === "namespaces") {
      if (options.namespaces !== undefined) throw new LineError('more than one "namespaces"');
      options.namespaces = value;
    } else {
      const field = key === "valid-after" ? "validAfter" : "validBefore";
      if (options[field] !== undefined) throw new LineError(`more than one "${key}"`);
      options[field] = parseSignerTime(value, key);
    }
    if (rest.startsWith(",")) {
      rest = rest.slice(1);
      if (rest === "") throw new LineError("options end with a comma");
    } else if (rest !== "") {
      throw new LineError(`unexpected ${JSON.stringify(rest)} after option ${key}`);
    }
  }
  if (
    options.validAfter !== undefined &&
    options.validBefore !== undefined &&
    options.validBefore.getTime() <= options.validAfter.getTime()
  ) {
    throw new LineError("valid-before is not after valid-after");
  }
  return options;
}

/** `"value"` (with `\"` inside) as OpenSSH's `opt_dequote` reads it; quotes are required. */
function dequote(text: string, option: string): [string, string] {
  if (!text.startsWith('"')) throw new LineError(`${option} value must be in double quotes`);
  let value = "";
  for (let index = 1; index < text.length; index++) {
    const char = text[index]!;
    if (char === "\\" && text[index + 1] === '"') {
      value += '"';
      index++;
    } else if (char === '"') {
      return [value, text.slice(index + 1)];
    } else {
      value += char;
    }
  }
  throw new LineError(`${option} value has no closing quote`);
}

/**
 * `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, followed by `Z` or `UTC` for UTC; otherwise
 * local time, as OpenSSH's `parse_absolute_time` reads it.
 */
function parseSignerTime(value: string, option = "time"): Date {
  const match = /^(\d{4})(\d{2})(\d{2})(?:(\d{2})(\d{2})(\d{2})?)?(z|utc)?$/i.exec(value);
  if (match === null) {
    throw new LineError(
      `${option} ${JSON.stringify(value)} is not YYYYMMDD, YYYYMMDDHHMM or YYYYMMDDHHMMSS (with Z for UTC)`,
    );
  }
  const [year, month, day, hour, minute, second] = match
    .slice(1, 7)
    .map((part) => Number(part ?? 0));
  const fields = [year!, month! - 1, day!, hour!, minute!, second!] as const;
  // Date rolls 2026-02-30 over into March; OpenSSH's strptime refuses it. The calendar is the
  // same in every zone, so it is checked in UTC.
  const calendar = new Date(Date.UTC(...fields));
  const back = [
    calendar.getUTCFullYear(),
    calendar.getUTCMonth(),
    calendar.getUTCDate(),
    calendar.getUTCHours(),
    calendar.getUTCMinutes(),
    calendar.getUTCSeconds(),
  ];
  if (back.some((part, index) => part !== fields[index])) {
    throw new LineError(`${option} ${JSON.stringify(value)} is not a valid date and time`);
  }
  return match[7] === undefined ? new Date(...fields) : calendar;
}

function parseKey(type: string, encoded: string): SshPublicKey {
  if (!isSshKeyType(type)) {
    const certificate = type.includes("-cert-");
    throw new LineError(
      certificate
        ? `key type ${type} is a certificate; distributor verifies plain keys only`
        : `key type ${JSON.stringify(type)} is not supported (use ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa)`,
    );
  }
  if (encoded === "" || !/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 !== 0) {
    throw new LineError(`${type} key is not base64`);
  }
  let key: SshPublicKey;
  try {
    key = parseSshPublicKey(Buffer.from(encoded, "base64"));
  } catch (error) {
    if (error instanceof SshWireError) throw new LineError(`${type} key: ${error.message}`);
    throw error;
  }
  if (key.type !== type) throw new LineError(`key is ${key.type}, but the line says ${type}`);
  return key;
}

/** The outcome of looking a signing key up in allowed_signers. */
export type SignerLookup =
  | { allowed: AllowedSigner }
  | {
      allowed?: undefined;
      /** Why not: the key is not listed, or why each line listing it does not allow it now. */
      reason: string;
    };

/**
 * The first line that lists `keyBlob`, allows `namespace` and is valid at `time`, as
 * `ssh-keygen -Y verify` looks it up; else why none does (the first line naming the key).
 */
export function findAllowedSigner(
  signers: readonly AllowedSigner[],
  keyBlob: Uint8Array,
  namespace: string,
  time: Date,
): SignerLookup {
  let reason: string | undefined;
  for (const signer of signers) {
    if (!sameBytes(signer.key.blob, keyBlob)) continue;
    const problem = signerProblem(signer, namespace, time);
    if (problem === undefined) return { allowed: signer };
    reason ??= `line ${signer.line} (${signer.principals}) ${problem}`;
  }
  return { reason: reason ?? "the key is not listed" };
}

function signerProblem(signer: AllowedSigner, namespace: string, time: Date): string | undefined {
  if (signer.namespaces !== undefined && matchPatternList(namespace, signer.namespaces) !== 1) {
    return `does not allow namespace ${JSON.stringify(namespace)} (namespaces="${signer.namespaces}")`;
  }
  if (signer.validAfter !== undefined && time.getTime() < signer.validAfter.getTime()) {
    return `is not valid yet: valid-after ${signer.validAfter.toISOString()}, checked at ${time.toISOString()}`;
  }
  if (signer.validBefore !== undefined && time.getTime() > signer.validBefore.getTime()) {
    return `has expired: valid-before ${signer.validBefore.toISOString()}, checked at ${time.toISOString()}`;
  }
  return undefined;
}

/**
 * OpenSSH's `match_pattern_list`: 1 when `value` matches a pattern of the comma-separated list
 * (`*` and `?` wildcards), -1 when it matches a negated one (`!pattern`), else 0.
 */
export function matchPatternList(value: string, list: string): 1 | 0 | -1 {
  let matched: 1 | 0 = 0;
  for (const entry of list.split(",")) {
    const negated = entry.startsWith("!");
    const pattern = negated ? entry.slice(1) : entry;
    if (!globMatches(value, pattern)) continue;
    if (negated) return -1;
    matched = 1;
  }
  return matched;
}

function globMatches(value: string, pattern: string): boolean {
  const source = [...pattern]
    .map((char) =>
      char === "*" ? ".*" : char === "?" ? "." : char.replace(/[\\^$.|+()[\]{}]/g, "\\$&"),
    )
    .join("");
  return new RegExp(`^${source}$`, "s").test(value);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}
