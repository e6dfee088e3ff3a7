import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** One usable line of an OpenSSH `known_hosts` file. */
export interface KnownHostEntry {
  /** 1-based line number, for messages that point an operator at the line. */
  line: number;
  /** `@revoked` keys are refused for the hosts they name; `@cert-authority` lines are not used. */
  marker?: "revoked" | "cert-authority";
  /** The host field as written: comma-separated patterns, or one hashed `|1|salt|hash` name. */
  hosts: string;
  /** Key type as written (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`, ...). */
  keyType: string;
  /** The raw public key blob (the base64 field decoded). */
  key: Buffer;
}

const HASH_PREFIX = "|1|";

/**
 * Parses the text of a `known_hosts` file. Comments, blank lines and lines that cannot be a host
 * key (too few fields, a key that is not base64, an unknown marker) are skipped, as OpenSSH does.
 */
export function parseKnownHosts(text: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  const lines = text.split("\n");
  for (let index = 0; index < lines.length; index++) {
    const entry = parseLine(lines[index] as string, index + 1);
    if (entry !== undefined) entries.push(entry);
  }
  return entries;
}

function parseLine(raw: string, line: number): KnownHostEntry | undefined {
  const text = raw.replace(/\r$/, "").trim();
  if (text === "" || text.startsWith("#")) return undefined;
  const fields = text.split(/[ \t]+/);
  let marker: KnownHostEntry["marker"];
  if (fields[0]?.startsWith("@")) {
    const name = fields.shift();
    if (name === "@revoked") marker = "revoked";
    else if (name === "@cert-authority") marker = "cert-authority";
    else return undefined;
  }
  const [hosts, keyType, encoded] = fields;
  if (hosts === undefined || keyType === undefined || encoded === undefined) return undefined;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return undefined;
  const key = Buffer.from(encoded, "base64");
  // The blob starts with its own type name; a mismatch is a corrupt or hand-edited line.
  if (blobKeyType(key) !== keyType) return undefined;
  return marker === undefined
    ? { line, hosts, keyType, key }
    : { line, marker, hosts, keyType, key };
}

/** The name `known_hosts` records a server under: `host` on port 22, else `[host]:port`. */
export function knownHostName(host: string, port: number): string {
  const name = host.toLowerCase();
  return port === 22 ? name : `[${name}]:${port}`;
}

/**
 * Whether the host field of an entry names `hostName` (as `knownHostName` builds it). A hashed
 * field is compared by HMAC-SHA1; a pattern list matches when one pattern matches and no negated
 * (`!pattern`) one does. Patterns use `*` and `?` and compare without regard to case.
 */
export function hostFieldMatches(hosts: string, hostName: string): boolean {
  if (hosts.startsWith(HASH_PREFIX)) return hashedMatches(hosts, hostName);
  let matched = false;
  for (const pattern of hosts.split(",")) {
    if (pattern === "") continue;
    const negated = pattern.startsWith("!");
    const body = negated ? pattern.slice(1) : pattern;
    if (!wildcardMatches(body.toLowerCase(), hostName.toLowerCase())) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

function hashedMatches(hosts: string, hostName: string): boolean {
  const parts = hosts.slice(HASH_PREFIX.length).split("|");
  if (parts.length !== 2) return false;
  const salt = Buffer.from(parts[0] as string, "base64");
  const expected = Buffer.from(parts[1] as string, "base64");
  const actual = createHmac("sha1", salt).update(hostName.toLowerCase()).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** OpenSSH's `match_pattern`: `*` is any run of characters, `?` exactly one. */
function wildcardMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === "?" || pattern[p] === text[t])) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      resume = t;
    } else if (star !== -1) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (pattern[p] === "*") p++;
  return p === pattern.length;
}

/** A hashed host field for `hostName` with a fresh or given salt, as `ssh-keygen -H` writes. */
export function hashHostName(hostName: string, salt: Buffer): string {
  const hash = createHmac("sha1", salt).update(hostName.toLowerCase()).digest();
  return `${HASH_PREFIX}${salt.toString("base64")}|${hash.toString("base64")}`;
}

/** The type name a public key blob starts with, or undefined when the blob is malformed. */
export function blobKeyType(key: Buffer): string | undefined {
  if (key.length < 4) return undefined;
  const length = key.readUInt32BE(0);
  if (length === 0 || length > 64 || 4 + length > key.length) return undefined;
  return key.toString("latin1", 4, 4 + length);
}

/** The key's fingerprint as OpenSSH prints it: `SHA256:` and unpadded base64. */
export function fingerprint(key: Buffer): string {
  return `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}`;
}

/** The line `accept_new` appends for a newly seen key (plain host name, as OpenSSH's default). */
export function knownHostsLine(host: string, port: number, key: Buffer): string {
  const type = blobKeyType(key) ?? "unknown";
  return `${knownHostName(host, port)} ${type} ${key.toString("base64")}\n`;
}
