import { execFile } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllowedSigners } from "../../src/signature/allowed-signers.js";
import { SigningError, signBundleManifest, signWithSshKeygen } from "../../src/signature/sign.js";
import { checkManifestSignature } from "../../src/signature/verify.js";
import { rejectionOf, TempDirs, writeBundle } from "../helpers.js";
import {
  makeKey,
  sshVerifies,
  type TestKey,
  type TestKeyKind,
  writeAllowedSigners,
} from "../ssh-keygen.js";

// Signing through the real `ssh-keygen -Y sign`, checked both ways: by `ssh-keygen -Y verify`
// and by distributor's own verifier.

const run = promisify(execFile);
const dirs = new TempDirs();
const KINDS: TestKeyKind[] = ["ed25519", "ecdsa-256", "rsa-2048"];
const keys = new Map<TestKeyKind, TestKey>();
let keyDir: string;

beforeAll(async () => {
  keyDir = await dirs.make();
  for (const kind of KINDS) keys.set(kind, await makeKey(keyDir, kind, kind));
}, 60_000);
afterAll(() => dirs.cleanup());

const key = (kind: TestKeyKind) => keys.get(kind) as TestKey;

describe("signBundleManifest", () => {
  for (const kind of KINDS) {
    it(`writes manifest.json.sig that ssh-keygen -Y verify and distributor accept (${kind})`, async () => {
      const root = await dirs.make();
      await writeBundle(root, "bundle", { "report.md": "# Report\n" });
      const bundle = join(root, "bundle");
      const signed = await signBundleManifest(bundle, { keyFile: key(kind).path });
      expect(signed).toMatchObject({
        path: join(bundle, "manifest.json.sig"),
        fingerprint: key(kind).fingerprint,
        namespace: "distributor",
      });
      const manifest = await readFile(join(bundle, "manifest.json"));
      const allowed = await writeAllowedSigners(root, [`ci@example.com ${key(kind).publicLine}`]);
      expect(
        await sshVerifies({
          allowedSigners: allowed,
          principal: "ci@example.com",
          namespace: "distributor",
          signatureFile: signed.path,
          message: manifest,
        }),
      ).toBe(true);
      const check = checkManifestSignature(manifest, await readFile(signed.path), {
        required: true,
        namespace: "distributor",
        allowedSigners: parseAllowedSigners(await readFile(allowed, "utf8"), allowed),
        allowedSignersSource: allowed,
      });
      expect(check).toMatchObject({ ok: true, signer: { fingerprint: key(kind).fingerprint } });
      // The temp file it wrote through is gone.
      expect((await readdir(bundle)).sort()).toEqual([
        "manifest.json",
        "manifest.json.sig",
        "report.md",
      ]);
    }, 30_000);
  }

  it("signs in the namespace asked for, and replaces an earlier signature", async () => {
    const root = await dirs.make();
    await writeBundle(root, "bundle", { "a.txt": "a\n" });
    const bundle = join(root, "bundle");
    await writeFile(join(bundle, "manifest.json.sig"), "an old signature\n");
    const signed = await signBundleManifest(bundle, {
      keyFile: key("ed25519").path,
      namespace: "releases@example.com",
    });
    expect(signed.namespace).toBe("releases@example.com");
    const allowed = await writeAllowedSigners(root, [`ci ${key("ed25519").publicLine}`]);
    const verifies = (namespace: string) =>
      readFile(join(bundle, "manifest.json")).then((message) =>
        sshVerifies({
          allowedSigners: allowed,
          principal: "ci",
          namespace,
          signatureFile: signed.path,
          message,
        }),
      );
    expect(await verifies("releases@example.com")).toBe(true);
    expect(await verifies("distributor")).toBe(false);
  }, 30_000);

  it("signs with a key an ssh-agent holds, given its public key", async () => {
    const root = await dirs.make();
    await writeBundle(root, "bundle", { "a.txt": "a\n" });
    // A key whose private half only the agent has.
    const agentKey = await makeKey(root, "agent-only", "ed25519");
    const { stdout } = await run("ssh-agent", ["-s"]);
    const socket = /SSH_AUTH_SOCK=([^;]+);/.exec(stdout)?.[1] as string;
    const pid = /SSH_AGENT_PID=(\d+);/.exec(stdout)?.[1] as string;
    const previous = process.env.SSH_AUTH_SOCK;
    try {
      await run("ssh-add", [agentKey.path], { env: { ...process.env, SSH_AUTH_SOCK: socket } });
      await run("rm", [agentKey.path]);
      process.env.SSH_AUTH_SOCK = socket;
      const signed = await signBundleManifest(join(root, "bundle"), {
        keyFile: `${agentKey.path}.pub`,
      });
      expect(signed.fingerprint).toBe(agentKey.fingerprint);
    } finally {
      if (previous === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = previous;
      process.kill(Number(pid));
    }
  }, 30_000);

  it("names the key file and what ssh-keygen said when it cannot sign, and writes nothing", async () => {
    const root = await dirs.make();
    await writeBundle(root, "bundle", { "a.txt": "a\n" });
    const missing = join(keyDir, "no-such-key");
    const error = await rejectionOf(() =>
      signBundleManifest(join(root, "bundle"), { keyFile: missing }),
    );
    expect(error).toBeInstanceOf(SigningError);
    expect((error as SigningError).message).toContain(`ssh-keygen -Y sign -f ${missing}`);
    expect((error as SigningError).message).toContain("exited with status");
    expect((await readdir(join(root, "bundle"))).sort()).toEqual(["a.txt", "manifest.json"]);
  }, 30_000);

  it("refuses what a tool printed that is not a signature of the data", async () => {
    // A stand-in for ssh-keygen that prints a valid signature of other bytes.
    const root = await dirs.make();
    const other = await signWithSshKeygen(Buffer.from("other bytes"), {
      keyFile: key("ed25519").path,
    });
    const fake = join(root, "fake-ssh-keygen");
    await writeFile(join(root, "other.sig"), other.armored);
    await writeFile(fake, `#!/bin/sh\ncat >/dev/null\ncat ${join(root, "other.sig")}\n`, {
      mode: 0o755,
    });
    const error = await rejectionOf(() =>
      signWithSshKeygen(Buffer.from("the manifest"), {
        keyFile: key("ed25519").path,
        sshKeygen: fake,
      }),
    );
    expect(error).toBeInstanceOf(SigningError);
    expect((error as Error).message).toContain("does not verify");
  }, 30_000);

  it("stops a tool that does not answer within the timeout", async () => {
    const root = await dirs.make();
    const stuck = join(root, "stuck-ssh-keygen");
    await writeFile(stuck, "#!/bin/sh\nexec sleep 30\n", { mode: 0o755 });
    const error = await rejectionOf(() =>
      signWithSshKeygen(Buffer.from("m"), { keyFile: "k", sshKeygen: stuck, timeoutMs: 300 }),
    );
    expect((error as Error).message).toContain("no signature after 300 ms");
  }, 30_000);
});
