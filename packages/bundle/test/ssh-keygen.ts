import { execFile, spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Key kinds the tests sign with: `ssh-keygen -t` and `-b`. */
export const TEST_KEYS = {
  ed25519: ["-t", "ed25519"],
  "ecdsa-256": ["-t", "ecdsa", "-b", "256"],
  "ecdsa-384": ["-t", "ecdsa", "-b", "384"],
  "ecdsa-521": ["-t", "ecdsa", "-b", "521"],
  "rsa-2048": ["-t", "rsa", "-b", "2048"],
} as const;

export type TestKeyKind = keyof typeof TEST_KEYS;

export interface TestKey {
  /** The private key file (`-f` of `ssh-keygen -Y sign`). */
  path: string;
  /** `keytype base64 comment`, as in `<path>.pub`. */
  publicLine: string;
  /** As `ssh-keygen -l` prints it: `SHA256:...`. */
  fingerprint: string;
}

/** A new unencrypted key pair in `dir`, made by the real ssh-keygen. */
export async function makeKey(dir: string, name: string, kind: TestKeyKind): Promise<TestKey> {
  const path = join(dir, name);
  await run("ssh-keygen", ["-q", ...TEST_KEYS[kind], "-N", "", "-C", name, "-f", path]);
  const publicLine = (await readFile(`${path}.pub`, "utf8")).trim();
  const { stdout } = await run("ssh-keygen", ["-l", "-f", `${path}.pub`]);
  const fingerprint = stdout.split(" ")[1] ?? "";
  return { path, publicLine, fingerprint };
}

/** Signs `file` with `ssh-keygen -Y sign`, writing `<file>.sig`; returns the signature's bytes. */
export async function sshSign(
  file: string,
  key: TestKey,
  namespace = "distributor",
  extra: readonly string[] = [],
): Promise<Uint8Array> {
  await run("ssh-keygen", ["-Y", "sign", "-f", key.path, "-n", namespace, ...extra, file]);
  return readFile(`${file}.sig`);
}

/** Writes an allowed_signers file of `lines` into `dir` and returns its path. */
export async function writeAllowedSigners(dir: string, lines: readonly string[]): Promise<string> {
  const path = join(dir, "allowed_signers");
  await writeFile(path, `${lines.join("\n")}\n`);
  return path;
}

/**
 * Whether `ssh-keygen -Y verify` accepts `signature` over `message` for `principal` in `namespace`
 * under `allowedSigners`: the reference the tests hold distributor's verifier to.
 */
export function sshVerifies(options: {
  allowedSigners: string;
  principal: string;
  namespace: string;
  signatureFile: string;
  message: Uint8Array;
}): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "ssh-keygen",
      [
        "-Y",
        "verify",
        "-f",
        options.allowedSigners,
        "-I",
        options.principal,
        "-n",
        options.namespace,
        "-s",
        options.signatureFile,
      ],
      { stdio: ["pipe", "ignore", "ignore"] },
    );
    child.on("error", reject);
    child.on("close", (code) => resolve(code === 0));
    child.stdin.end(options.message);
  });
}
