import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AllowedSignersError,
  findAllowedSigner,
  matchPatternList,
  parseAllowedSigners,
} from "../../src/signature/allowed-signers.js";

// Keys from `ssh-keygen -t ed25519` and `-t ecdsa`, fixed so parsing needs no tool.
const ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF4AwE8wmTZRTISnmMS/Sf8rXW1koUdJtIv6AsQHyF09";
const ED25519_FINGERPRINT = "SHA256:KtetNUqCytfftdGVpyclXY8l9hMKQJypf/GfYQN5kvY";
const ECDSA =
  "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBDlZ6+ZFjHwTbSOZ69Hd756K6+EXV61XaseqFV9TdfSh5CVMU+o/+q8miN0any3LAW6CT3CkuS6CWXi/XVF5k9k=";

function parse(text: string) {
  return parseAllowedSigners(text, "/etc/distributor/allowed_signers");
}

function failure(text: string): AllowedSignersError {
  try {
    parse(text);
  } catch (error) {
    if (error instanceof AllowedSignersError) return error;
    throw error;
  }
  throw new Error("expected the file to be refused");
}

describe("parseAllowedSigners", () => {
  it("reads principals, the key, its fingerprint and ignores comments and blank lines", () => {
    const signers = parse(`# release signers\n\nalice@example.com ${ED25519} alice's laptop\n`);
    expect(signers).toHaveLength(1);
    expect(signers[0]).toMatchObject({ principals: "alice@example.com", line: 3 });
    expect(signers[0]?.key.type).toBe("ssh-ed25519");
    expect(signers[0]?.key.fingerprint).toBe(ED25519_FINGERPRINT);
  });

  it("reads quoted principals, several principals and CRLF line ends", () => {
    const signers = parse(`"release bot" ${ED25519}\r\nbob,carol ${ECDSA}\r\n`);
    expect(signers.map((signer) => [signer.principals, signer.key.type])).toEqual([
      ["release bot", "ssh-ed25519"],
      ["bob,carol", "ecdsa-sha2-nistp256"],
    ]);
  });

  it("reads namespaces, valid-after and valid-before (UTC with Z, local without)", () => {
    const [signer] = parse(
      `alice namespaces="distributor,git",valid-after="20260101",valid-before="20270630123000Z" ${ED25519}`,
    );
    expect(signer?.namespaces).toBe("distributor,git");
    expect(signer?.validAfter).toEqual(new Date(2026, 0, 1));
    expect(signer?.validBefore).toEqual(new Date("2027-06-30T12:30:00Z"));
  });

  it("reads option names in any case, as OpenSSH does", () => {
    const [signer] = parse(`alice Valid-Before="202701010000utc" ${ED25519}`);
    expect(signer?.validBefore).toEqual(new Date("2027-01-01T00:00:00Z"));
  });

  it("refuses cert-authority with a message naming the file and the line", () => {
    const error = failure(`alice ${ED25519}\n*@example.com cert-authority ${ED25519}\n`);
    expect(error.line).toBe(2);
    expect(error.message).toBe(
      "/etc/distributor/allowed_signers:2: cert-authority is not supported: distributor verifies signatures by plain keys, not certificates; list each signer's public key instead",
    );
  });

  it.each([
    [`alice ${ED25519.split(" ")[0]}`, "ssh-ed25519 key is not base64"],
    ["alice", "missing key"],
    [`alice restrict=yes ${ED25519}`, 'unknown option "restrict=yes"'],
    [`alice namespaces=git ${ED25519}`, "namespaces value must be in double quotes"],
    [`alice namespaces="git ${ED25519}`, "namespaces value has no closing quote"],
    [`alice valid-before="2026" ${ED25519}`, 'valid-before "2026" is not YYYYMMDD'],
    [`alice valid-before="20261341" ${ED25519}`, 'valid-before "20261341" is not a valid date'],
    [
      `alice valid-after="20270101Z",valid-before="20260101Z" ${ED25519}`,
      "valid-before is not after valid-after",
    ],
    [`alice namespaces="a",namespaces="b" ${ED25519}`, 'more than one "namespaces"'],
    [`alice namespaces="a", ${ED25519}`, "options end with a comma"],
    ["alice ssh-dss AAAAB3NzaC1kc3M=", 'key type "ssh-dss" is not supported'],
    [
      "alice ssh-ed25519-cert-v01@openssh.com AAAA",
      "key type ssh-ed25519-cert-v01@openssh.com is a certificate",
    ],
    [`alice ssh-rsa ${ED25519.split(" ")[1]}`, "key is ssh-ed25519, but the line says ssh-rsa"],
    [
      "alice ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAAQA=",
      "ssh-ed25519 key: ed25519 key is not 32 bytes",
    ],
    [`"alice ${ED25519}`, "principals have no closing quote"],
  ])("refuses %j", (line, detail) => {
    const error = failure(`${line}\n`);
    expect(error.line).toBe(1);
    expect(error.message).toContain(`allowed_signers:1: ${detail}`);
  });

  it("fails on nothing but AllowedSignersError, whatever the text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        try {
          parse(text);
        } catch (error) {
          expect(error).toBeInstanceOf(AllowedSignersError);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("findAllowedSigner", () => {
  const [alice] = parse(`alice ${ED25519}`);
  const blob = alice!.key.blob;

  it("answers the reason of the first line naming the key when none allows it", () => {
    const signers = parse(
      `a namespaces="git" ${ED25519}\nb valid-before="20200101Z" ${ED25519}\nc ${ECDSA}`,
    );
    expect(findAllowedSigner(signers, blob, "distributor", new Date())).toEqual({
      reason: 'line 1 (a) does not allow namespace "distributor" (namespaces="git")',
    });
    expect(findAllowedSigner(signers.slice(2), blob, "distributor", new Date())).toEqual({
      reason: "the key is not listed",
    });
  });

  it("allows a key exactly at its valid-before second, as OpenSSH does", () => {
    const signers = parse(`a valid-before="20260101000000Z" ${ED25519}`);
    const at = new Date("2026-01-01T00:00:00Z");
    expect(findAllowedSigner(signers, blob, "distributor", at).allowed).toBeDefined();
    const after = new Date(at.getTime() + 1000);
    expect(findAllowedSigner(signers, blob, "distributor", after).allowed).toBeUndefined();
  });
});

describe("matchPatternList", () => {
  it.each([
    ["distributor", "distributor", 1],
    ["distributor", "git,distributor", 1],
    ["distributor", "dist*", 1],
    ["distributor", "distributo?", 1],
    ["distributor", "git", 0],
    ["distributor", "*,!distributor", -1],
    ["distributor", "d.stributor", 0],
  ] as const)("%s against %s is %d", (value, list, expected) => {
    expect(matchPatternList(value, list)).toBe(expected);
  });
});
