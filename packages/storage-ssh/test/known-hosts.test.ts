import { createHash, createHmac, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkHostKey, decideHostKey, recordedKeyTypes } from "../src/known-hosts/check.js";
import { appendKnownHost, readKnownHosts } from "../src/known-hosts/file.js";
import {
  fingerprint,
  hashHostName,
  hostFieldMatches,
  knownHostName,
  knownHostsLine,
  parseKnownHosts,
} from "../src/known-hosts/parse.js";

/** A public key blob as a server sends it: type name, then key bytes (SSH wire strings). */
function blob(type: string, body: Buffer = randomBytes(32)): Buffer {
  const string = (bytes: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return Buffer.concat([length, bytes]);
  };
  return Buffer.concat([string(Buffer.from(type)), string(body)]);
}

const ed = blob("ssh-ed25519");
const edOther = blob("ssh-ed25519");
const ecdsa = blob("ecdsa-sha2-nistp256", randomBytes(65));
const b64 = (key: Buffer) => key.toString("base64");

describe("parseKnownHosts", () => {
  it("reads plain, hashed and marked lines and skips comments, blanks and junk", () => {
    const hashed = hashHostName("[files.example]:2222", randomBytes(20));
    const text = [
      "# a comment",
      "",
      `files.example,10.0.0.5 ssh-ed25519 ${b64(ed)} ops@laptop`,
      `${hashed} ecdsa-sha2-nistp256 ${b64(ecdsa)}`,
      `@revoked * ssh-ed25519 ${b64(edOther)}`,
      `@cert-authority *.example ssh-ed25519 ${b64(ed)}`,
      "only-two fields",
      `bad.example ssh-ed25519 not*base64`,
      `typo.example ssh-rsa ${b64(ed)}`,
      `@unknown x ssh-ed25519 ${b64(ed)}`,
      `\tindented.example  ssh-ed25519   ${b64(ed)}\r`,
    ].join("\n");
    const entries = parseKnownHosts(text);
    expect(entries.map((entry) => [entry.line, entry.marker, entry.hosts, entry.keyType])).toEqual([
      [3, undefined, "files.example,10.0.0.5", "ssh-ed25519"],
      [4, undefined, hashed, "ecdsa-sha2-nistp256"],
      [5, "revoked", "*", "ssh-ed25519"],
      [6, "cert-authority", "*.example", "ssh-ed25519"],
      [11, undefined, "indented.example", "ssh-ed25519"],
    ]);
    expect(entries[0]?.key.equals(ed)).toBe(true);
  });

  it("names non-default ports in brackets", () => {
    expect(knownHostName("Files.Example", 22)).toBe("files.example");
    expect(knownHostName("files.example", 2222)).toBe("[files.example]:2222");
  });

  it("matches patterns with wildcards, negation and case-insensitively", () => {
    expect(hostFieldMatches("a.example,b.example", "b.example")).toBe(true);
    expect(hostFieldMatches("*.Example", "files.example")).toBe(true);
    expect(hostFieldMatches("files?.example", "files1.example")).toBe(true);
    expect(hostFieldMatches("files?.example", "files.example")).toBe(false);
    expect(hostFieldMatches("*.example,!secret.example", "secret.example")).toBe(false);
    expect(hostFieldMatches("*.example,!secret.example", "open.example")).toBe(true);
    expect(hostFieldMatches("[files.example]:2222", "[files.example]:2222")).toBe(true);
    expect(hostFieldMatches("files.example", "[files.example]:2222")).toBe(false);
    expect(hostFieldMatches("[files.example]:2222", "files.example")).toBe(false);
  });

  it("matches a hashed name exactly as ssh-keygen -H computes it", () => {
    fc.assert(
      fc.property(fc.domain(), fc.integer({ min: 1, max: 65535 }), (host, port) => {
        const name = knownHostName(host, port);
        const field = hashHostName(name, randomBytes(20));
        expect(hostFieldMatches(field, name)).toBe(true);
        expect(hostFieldMatches(field, knownHostName(`x${host}`, port))).toBe(false);
      }),
      { numRuns: 50 },
    );
    // A literal entry written by `ssh-keygen -H` for "[127.0.0.1]:2222" (salt and HMAC-SHA1).
    const salt = Buffer.from("0123456789abcdefghij");
    const expected = `|1|${salt.toString("base64")}|${createHashHmac(salt, "[127.0.0.1]:2222")}`;
    expect(hashHostName("[127.0.0.1]:2222", salt)).toBe(expected);
  });

  it("prints fingerprints as OpenSSH does", () => {
    const digest = createHash("sha256").update(ed).digest("base64");
    expect(fingerprint(ed)).toBe(`SHA256:${digest.replace(/=+$/, "")}`);
    expect(fingerprint(ed)).not.toContain("=");
  });

  it("formats the line accept_new appends so that it parses back", () => {
    const line = knownHostsLine("Files.Example", 2222, ed);
    expect(line).toBe(`[files.example]:2222 ssh-ed25519 ${b64(ed)}\n`);
    const [entry] = parseKnownHosts(line);
    expect(checkHostKey([entry!], "files.example", 2222, ed).status).toBe("known");
  });
});

function createHashHmac(salt: Buffer, name: string): string {
  return createHmac("sha1", salt).update(name).digest("base64");
}

describe("checkHostKey", () => {
  const entries = parseKnownHosts(
    [
      `files.example ssh-ed25519 ${b64(ed)}`,
      `files.example ecdsa-sha2-nistp256 ${b64(ecdsa)}`,
      `[files.example]:2222 ssh-ed25519 ${b64(edOther)}`,
      `@revoked revoked.example ssh-ed25519 ${b64(ed)}`,
      `revoked.example ssh-ed25519 ${b64(ed)}`,
    ].join("\n"),
  );

  it("knows any of several keys recorded for a host", () => {
    expect(checkHostKey(entries, "files.example", 22, ed)).toMatchObject({
      status: "known",
      entry: { line: 1 },
    });
    expect(checkHostKey(entries, "FILES.example", 22, ecdsa)).toMatchObject({
      status: "known",
      entry: { line: 2 },
    });
  });

  it("keeps ports apart", () => {
    expect(checkHostKey(entries, "files.example", 2222, edOther).status).toBe("known");
    expect(checkHostKey(entries, "files.example", 2222, ed)).toMatchObject({
      status: "changed",
      recorded: [{ line: 3 }],
    });
    expect(checkHostKey(entries, "files.example", 2200, ed).status).toBe("unknown");
  });

  it("reports another key for a known host as changed", () => {
    const fresh = blob("ssh-ed25519");
    const status = checkHostKey(entries, "files.example", 22, fresh);
    expect(status).toMatchObject({ status: "changed", recorded: [{ line: 1 }, { line: 2 }] });
    const rsa = blob("ssh-rsa", randomBytes(64));
    expect(checkHostKey(entries, "files.example", 22, rsa).status).toBe("changed");
  });

  it("refuses a revoked key even where it is also recorded", () => {
    expect(checkHostKey(entries, "revoked.example", 22, ed)).toMatchObject({
      status: "revoked",
      entry: { line: 4 },
    });
  });

  it("ignores cert-authority lines", () => {
    const ca = parseKnownHosts(`@cert-authority *.example ssh-ed25519 ${b64(ed)}`);
    expect(checkHostKey(ca, "files.example", 22, ed).status).toBe("unknown");
  });

  it("lists the recorded key types so the client asks for them first", () => {
    expect(recordedKeyTypes(entries, "files.example", 22)).toEqual([
      "ssh-ed25519",
      "ecdsa-sha2-nistp256",
    ]);
    expect(recordedKeyTypes(entries, "nowhere.example", 22)).toEqual([]);
  });
});

describe("decideHostKey", () => {
  const context = { host: "files.example", port: 2222, key: ed, knownHostsFile: "/kh" };

  it("accepts a known key under both policies", () => {
    const known = { status: "known", entry: parseKnownHosts(`x ssh-ed25519 ${b64(ed)}`)[0]! };
    expect(decideHostKey(known as never, "strict", context)).toEqual({ action: "accept" });
    expect(decideHostKey(known as never, "accept_new", context)).toEqual({ action: "accept" });
  });

  it("records an unknown key only under accept_new", () => {
    expect(decideHostKey({ status: "unknown" }, "accept_new", context)).toEqual({
      action: "record",
    });
    const refused = decideHostKey({ status: "unknown" }, "strict", context);
    expect(refused.action).toBe("refuse");
    const reason = (refused as { reason: string }).reason;
    expect(reason).toContain("host files.example port 2222");
    expect(reason).toContain(fingerprint(ed));
    expect(reason).toContain("/kh");
  });

  it("refuses a changed key under both policies, naming both fingerprints", () => {
    const recorded = parseKnownHosts(`[files.example]:2222 ssh-ed25519 ${b64(edOther)}`);
    for (const policy of ["strict", "accept_new"] as const) {
      const decision = decideHostKey({ status: "changed", recorded }, policy, context);
      expect(decision.action).toBe("refuse");
      const reason = (decision as { reason: string }).reason;
      expect(reason).toContain("has changed");
      expect(reason).toContain("port 2222");
      expect(reason).toContain(fingerprint(ed));
      expect(reason).toContain(fingerprint(edOther));
      expect(reason).toContain("line 1");
    }
  });
});

describe("known_hosts file", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-known-hosts-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("treats a missing file as empty and creates it, with its directory, on append", async () => {
    const file = join(dir, "ssh", "known_hosts");
    expect(await readKnownHosts(file)).toEqual([]);
    await appendKnownHost(file, knownHostsLine("a.example", 22, ed));
    expect(await readFile(file, "utf8")).toBe(`a.example ssh-ed25519 ${b64(ed)}\n`);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, "ssh"))).mode & 0o777).toBe(0o700);
  });

  it("keeps the existing bytes and mode, adding a missing final newline", async () => {
    const file = join(dir, "known_hosts");
    await writeFile(file, "# mine\nold.example ssh-ed25519 AAAA", { mode: 0o644 });
    await appendKnownHost(file, knownHostsLine("a.example", 22, ed));
    expect(await readFile(file, "utf8")).toBe(
      `# mine\nold.example ssh-ed25519 AAAA\na.example ssh-ed25519 ${b64(ed)}\n`,
    );
    expect((await stat(file)).mode & 0o777).toBe(0o644);
  });

  it("loses no line when several appends run at once", async () => {
    const file = join(dir, "known_hosts");
    const keys = Array.from({ length: 8 }, () => blob("ssh-ed25519"));
    await Promise.all(
      keys.map((key, index) => appendKnownHost(file, knownHostsLine(`h${index}`, 22, key))),
    );
    const entries = await readKnownHosts(file);
    expect(entries.map((entry) => entry.hosts).sort()).toEqual(keys.map((_, i) => `h${i}`).sort());
  });

  it("updates a symlinked file at its target", async () => {
    const target = join(dir, "real_known_hosts");
    await writeFile(target, "");
    await symlink(target, join(dir, "known_hosts"));
    await appendKnownHost(join(dir, "known_hosts"), knownHostsLine("a.example", 22, ed));
    expect((await readKnownHosts(target)).map((entry) => entry.hosts)).toEqual(["a.example"]);
  });
});
