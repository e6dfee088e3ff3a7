import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllowedSigners } from "../../src/signature/allowed-signers.js";
import {
  checkManifestSignature,
  DEFAULT_SIGNATURE_NAMESPACE,
  type SignatureCheck,
  type SignaturePolicy,
} from "../../src/signature/verify.js";
import { TempDirs } from "../helpers.js";
import {
  makeKey,
  sshSign,
  sshVerifies,
  type TestKey,
  type TestKeyKind,
  writeAllowedSigners,
} from "../ssh-keygen.js";

// Signatures made by the real `ssh-keygen -Y sign`, checked by distributor and, for every
// outcome, against what `ssh-keygen -Y verify` says about the same files.

const dirs = new TempDirs();
let dir: string;
const keys = {} as Record<TestKeyKind | "stranger", TestKey>;
const MANIFEST = new TextEncoder().encode(
  '{\n  "schema_version": 1,\n  "id": "reports.example",\n  "created": "2026-06-04T11:55:00Z",\n  "files": []\n}\n',
);

beforeAll(async () => {
  dir = await dirs.make();
  const kinds: TestKeyKind[] = ["ed25519", "ecdsa-256", "ecdsa-384", "ecdsa-521", "rsa-2048"];
  await Promise.all([
    ...kinds.map(async (kind) => {
      keys[kind] = await makeKey(dir, kind, kind);
    }),
    makeKey(dir, "stranger", "ed25519").then((key) => {
      keys.stranger = key;
    }),
  ]);
}, 60_000);

afterAll(() => dirs.cleanup());

/** Signs MANIFEST (or `message`) in a fresh file; the signature file's path and bytes. */
async function signed(
  key: TestKey,
  options: { namespace?: string; extra?: string[]; name?: string } = {},
): Promise<{ file: string; signature: Uint8Array }> {
  const file = join(dir, `${options.name ?? "manifest"}-${Math.random().toString(36).slice(2)}`);
  await writeFile(file, MANIFEST);
  const signature = await sshSign(file, key, options.namespace, options.extra);
  return { file: `${file}.sig`, signature };
}

function policy(
  lines: readonly string[],
  overrides: Partial<SignaturePolicy> = {},
): SignaturePolicy {
  return {
    required: true,
    namespace: DEFAULT_SIGNATURE_NAMESPACE,
    allowedSigners: parseAllowedSigners(`${lines.join("\n")}\n`, "allowed_signers"),
    allowedSignersSource: "allowed_signers",
    ...overrides,
  };
}

/** distributor's verdict and ssh-keygen's on the same signature, message and allowed signers. */
async function bothVerdicts(
  lines: readonly string[],
  sig: { file: string; signature: Uint8Array },
  message: Uint8Array = MANIFEST,
  namespace = DEFAULT_SIGNATURE_NAMESPACE,
): Promise<{ ours: SignatureCheck; openssh: boolean }> {
  const allowedSigners = await writeAllowedSigners(dir, lines);
  const ours = checkManifestSignature(message, sig.signature, policy(lines, { namespace }));
  const principal = lines[0]?.split(" ")[0] ?? "nobody";
  const openssh = await sshVerifies({
    allowedSigners,
    principal,
    namespace,
    signatureFile: sig.file,
    message,
  });
  return { ours, openssh };
}

describe("checkManifestSignature with ssh-keygen signatures", () => {
  const kinds: TestKeyKind[] = ["ed25519", "ecdsa-256", "ecdsa-384", "ecdsa-521", "rsa-2048"];

  it.each(kinds)(
    "accepts a %s signature from an allowed signer, as ssh-keygen does",
    async (kind) => {
      const key = keys[kind];
      const sig = await signed(key);
      const { ours, openssh } = await bothVerdicts([`alice@example.com ${key.publicLine}`], sig);
      expect(openssh).toBe(true);
      expect(ours).toEqual({
        ok: true,
        signer: {
          principal: "alice@example.com",
          fingerprint: key.fingerprint,
          keyType: key.publicLine.split(" ")[0],
        },
      });
    },
  );

  it.each(["sha256", "sha512"])("accepts the %s message hash", async (hash) => {
    const sig = await signed(keys.ed25519, { extra: ["-O", `hashalg=${hash}`] });
    const { ours, openssh } = await bothVerdicts([`alice ${keys.ed25519.publicLine}`], sig);
    expect([ours.ok, openssh]).toEqual([true, true]);
  });

  it.each(kinds)(
    "refuses a manifest changed after a %s signature: signature_invalid",
    async (kind) => {
      const key = keys[kind];
      const sig = await signed(key);
      const changed = new Uint8Array(MANIFEST);
      changed[changed.length - 3] = 0x20;
      const { ours, openssh } = await bothVerdicts([`alice ${key.publicLine}`], sig, changed);
      expect(openssh).toBe(false);
      expect(ours).toMatchObject({
        ok: false,
        issue: { code: "signature_invalid", path: "manifest.json.sig", actual: key.fingerprint },
      });
      if (!ours.ok) {
        expect(ours.issue.message).toBe(
          `manifest.json.sig: signature by ${key.publicLine.split(" ")[0]} key ${key.fingerprint} is not valid for manifest.json: the signature does not verify`,
        );
      }
    },
  );

  it("refuses a signature by a key allowed_signers does not list: signer_not_allowed", async () => {
    const sig = await signed(keys.stranger);
    const { ours, openssh } = await bothVerdicts([`alice ${keys.ed25519.publicLine}`], sig);
    expect(openssh).toBe(false);
    expect(ours).toEqual({
      ok: false,
      issue: {
        code: "signer_not_allowed",
        path: "manifest.json.sig",
        actual: keys.stranger.fingerprint,
        message: `manifest.json.sig: signed by ssh-ed25519 key ${keys.stranger.fingerprint}, which allowed_signers does not allow: the key is not listed`,
      },
    });
  });

  it("refuses a signature made in another namespace: signature_invalid", async () => {
    const sig = await signed(keys.ed25519, { namespace: "git" });
    const { ours, openssh } = await bothVerdicts([`alice ${keys.ed25519.publicLine}`], sig);
    expect(openssh).toBe(false);
    expect(ours.ok).toBe(false);
    if (!ours.ok) {
      expect(ours.issue.code).toBe("signature_invalid");
      expect(ours.issue.message).toContain('made for namespace "git", not "distributor"');
    }
  });

  it("checks a configured namespace instead of distributor", async () => {
    const sig = await signed(keys.ed25519, { namespace: "releases@example.com" });
    const lines = [`alice ${keys.ed25519.publicLine}`];
    const { ours, openssh } = await bothVerdicts(lines, sig, MANIFEST, "releases@example.com");
    expect([ours.ok, openssh]).toEqual([true, true]);
  });

  it("refuses a key whose namespaces= option leaves distributor out: signer_not_allowed", async () => {
    const sig = await signed(keys.ed25519);
    const lines = [`alice namespaces="git,file" ${keys.ed25519.publicLine}`];
    const { ours, openssh } = await bothVerdicts(lines, sig);
    expect(openssh).toBe(false);
    expect(ours).toMatchObject({ ok: false, issue: { code: "signer_not_allowed" } });
    if (!ours.ok) {
      expect(ours.issue.message).toContain(
        'line 1 (alice) does not allow namespace "distributor" (namespaces="git,file")',
      );
    }
  });

  it("accepts a key whose namespaces= patterns match distributor", async () => {
    const sig = await signed(keys["ecdsa-256"]);
    const lines = [`alice namespaces="git,distrib*" ${keys["ecdsa-256"].publicLine}`];
    const { ours, openssh } = await bothVerdicts(lines, sig);
    expect([ours.ok, openssh]).toEqual([true, true]);
  });

  it("refuses a key past its valid-before: signer_not_allowed, naming the line", async () => {
    const sig = await signed(keys.ed25519);
    const lines = [`alice valid-before="20200101Z" ${keys.ed25519.publicLine}`];
    const { ours, openssh } = await bothVerdicts(lines, sig);
    expect(openssh).toBe(false);
    expect(ours.ok).toBe(false);
    if (!ours.ok) {
      expect(ours.issue.code).toBe("signer_not_allowed");
      expect(ours.issue.message).toContain(
        "line 1 (alice) has expired: valid-before 2020-01-01T00:00:00.000Z",
      );
    }
  });

  it("refuses a key before its valid-after, and accepts it inside its window", async () => {
    const sig = await signed(keys.ed25519);
    const future = [`alice valid-after="29990101Z" ${keys.ed25519.publicLine}`];
    const early = await bothVerdicts(future, sig);
    expect([early.ours.ok, early.openssh]).toEqual([false, false]);
    const window = [
      `alice valid-after="20200101",valid-before="29990101Z" ${keys.ed25519.publicLine}`,
    ];
    const inside = await bothVerdicts(window, sig);
    expect([inside.ours.ok, inside.openssh]).toEqual([true, true]);
  });

  it("rotates keys: an expired line for one key, a current line for the next", async () => {
    const lines = [
      `old@example.com valid-before="20200101Z" ${keys.ed25519.publicLine}`,
      `new@example.com ${keys["rsa-2048"].publicLine}`,
    ];
    const fresh = checkManifestSignature(
      MANIFEST,
      (await signed(keys["rsa-2048"])).signature,
      policy(lines),
    );
    expect(fresh).toMatchObject({ ok: true, signer: { principal: "new@example.com" } });
    const stale = checkManifestSignature(
      MANIFEST,
      (await signed(keys.ed25519)).signature,
      policy(lines),
    );
    expect(stale).toMatchObject({ ok: false, issue: { code: "signer_not_allowed" } });
  });

  it("takes the first line that allows the key when a key is listed twice", async () => {
    const sig = await signed(keys.ed25519);
    const lines = [
      `git-only namespaces="git" ${keys.ed25519.publicLine}`,
      `alice ${keys.ed25519.publicLine}`,
    ];
    expect(checkManifestSignature(MANIFEST, sig.signature, policy(lines))).toMatchObject({
      ok: true,
      signer: { principal: "alice" },
    });
  });

  it("checks the validity window at the policy's time", async () => {
    const sig = await signed(keys.ed25519);
    const lines = [`alice valid-before="20300101Z" ${keys.ed25519.publicLine}`];
    const later = new Date("2031-01-01T00:00:00Z");
    expect(
      checkManifestSignature(MANIFEST, sig.signature, policy(lines, { now: later })),
    ).toMatchObject({
      ok: false,
      issue: { code: "signer_not_allowed" },
    });
  });
});

describe("checkManifestSignature without a usable signature", () => {
  const lines = () => [`alice ${keys.ed25519.publicLine}`];

  it("refuses a missing signature when required: signature_missing", () => {
    expect(checkManifestSignature(MANIFEST, undefined, policy(lines()))).toEqual({
      ok: false,
      issue: {
        code: "signature_missing",
        path: "manifest.json.sig",
        message:
          "manifest.json.sig: missing; the pipeline requires manifest.json signed by a key in allowed_signers (ssh-keygen -Y sign -n distributor)",
      },
    });
  });

  it("accepts a missing signature when not required, with no signer", () => {
    expect(
      checkManifestSignature(MANIFEST, undefined, policy(lines(), { required: false })),
    ).toEqual({ ok: true, signer: undefined });
  });

  it("still refuses a present but invalid signature when not required", async () => {
    const sig = await signed(keys.stranger);
    expect(
      checkManifestSignature(MANIFEST, sig.signature, policy(lines(), { required: false })),
    ).toMatchObject({ ok: false, issue: { code: "signer_not_allowed" } });
  });

  it.each([
    ["text that is no signature", "hello\n", "does not start with -----BEGIN SSH SIGNATURE-----"],
    [
      "a header without a footer",
      "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n",
      "has no -----END SSH SIGNATURE----- line",
    ],
    [
      "armour around no SSHSIG blob",
      "-----BEGIN SSH SIGNATURE-----\naGVsbG8gd29ybGQ=\n-----END SSH SIGNATURE-----\n",
      "is not an SSHSIG signature (no SSHSIG preamble)",
    ],
    [
      "armour around something not base64",
      "-----BEGIN SSH SIGNATURE-----\n%%%\n-----END SSH SIGNATURE-----\n",
      "holds something other than base64",
    ],
  ])("refuses %s: signature_invalid", (_, text, detail) => {
    const check = checkManifestSignature(MANIFEST, new TextEncoder().encode(text), policy(lines()));
    expect(check.ok).toBe(false);
    if (!check.ok) {
      expect(check.issue.code).toBe("signature_invalid");
      expect(check.issue.message).toContain(detail);
    }
  });

  it("refuses a truncated signature blob and a blob with trailing data", async () => {
    const sig = await signed(keys.ed25519);
    const text = new TextDecoder().decode(sig.signature);
    const body = text.split("\n").slice(1, -2).join("");
    const blob = Buffer.from(body, "base64");
    for (const altered of [
      blob.subarray(0, blob.length - 5),
      Buffer.concat([blob, Buffer.from([0])]),
    ]) {
      const armored = `-----BEGIN SSH SIGNATURE-----\n${altered.toString("base64")}\n-----END SSH SIGNATURE-----\n`;
      const check = checkManifestSignature(
        MANIFEST,
        new TextEncoder().encode(armored),
        policy(lines()),
      );
      expect(check).toMatchObject({ ok: false, issue: { code: "signature_invalid" } });
    }
  });

  it("reads a signature with CRLF line ends, as a Windows checkout leaves it", async () => {
    const sig = await signed(keys.ed25519);
    const crlf = (await readFile(sig.file, "utf8")).replace(/\n/g, "\r\n");
    const check = checkManifestSignature(MANIFEST, new TextEncoder().encode(crlf), policy(lines()));
    expect(check.ok).toBe(true);
  });
});
