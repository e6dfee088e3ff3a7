import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { MANIFEST_FILE_NAME, SIGNATURE_FILE_NAME } from "../manifest-checks.js";
import { SshWireError } from "./ssh-wire.js";
import { parseSshSignature, sshsigProblem } from "./sshsig.js";
import { DEFAULT_SIGNATURE_NAMESPACE } from "./verify.js";

/** How long `ssh-keygen -Y sign` may take (an agent that asks for confirmation waits for it). */
export const DEFAULT_SIGN_TIMEOUT_MS = 60_000;
/** Larger than any armored signature; a bound on what is kept of the tool's output. */
const MAX_OUTPUT_BYTES = 64 * 1024;

export interface SignOptions {
  /**
   * The private key file, or the public key (`.pub`) of a key an ssh-agent holds
   * (`SSH_AUTH_SOCK`): what `ssh-keygen -Y sign -f` takes.
   */
  keyFile: string;
  /** The SSHSIG namespace (default `distributor`). */
  namespace?: string | undefined;
  /** The `ssh-keygen` to run (default: the one on PATH). */
  sshKeygen?: string | undefined;
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** Why a signature could not be made; the message names the key file and what the tool said. */
export class SigningError extends Error {
  override readonly name = "SigningError";
  constructor(
    message: string,
    readonly keyFile: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface MadeSignature {
  /** The armored SSHSIG signature, as `manifest.json.sig` holds it. */
  armored: string;
  /** `SHA256:...` of the signing key, as `ssh-keygen -l` prints it. */
  fingerprint: string;
  keyType: string;
  namespace: string;
}

/**
 * Signs `data` with `ssh-keygen -Y sign` (the data on its standard input, the signature on its
 * standard output), then checks that what it printed is a valid SSHSIG signature of exactly
 * `data` in `namespace` before returning it. A passphrase-protected key is asked for on the
 * terminal, or held by an agent (give its `.pub`).
 */
export async function signWithSshKeygen(
  data: Uint8Array,
  options: SignOptions,
): Promise<MadeSignature> {
  const namespace = options.namespace ?? DEFAULT_SIGNATURE_NAMESPACE;
  const tool = options.sshKeygen ?? "ssh-keygen";
  const args = ["-Y", "sign", "-f", options.keyFile, "-n", namespace];
  const output = await runTool(tool, args, data, options);
  let parsed: ReturnType<typeof parseSshSignature>;
  try {
    parsed = parseSshSignature(output);
  } catch (error) {
    if (!(error instanceof SshWireError)) throw error;
    throw new SigningError(
      `${tool} -Y sign -f ${options.keyFile}: printed something that is not an SSH signature: it ${error.message}`,
      options.keyFile,
    );
  }
  const problem = sshsigProblem(parsed, data, namespace);
  if (problem !== undefined) {
    throw new SigningError(
      `${tool} -Y sign -f ${options.keyFile}: the signature it made does not verify: ${problem}`,
      options.keyFile,
    );
  }
  return { armored: output, fingerprint: parsed.fingerprint, keyType: parsed.keyType, namespace };
}

function runTool(
  tool: string,
  args: readonly string[],
  input: Uint8Array,
  options: SignOptions,
): Promise<string> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_SIGN_TIMEOUT_MS;
  const command = `${tool} ${args.join(" ")}`;
  return new Promise((resolve, reject) => {
    // A passphrase is asked on the terminal, if there is one, never through a graphical askpass.
    const child = spawn(tool, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, SSH_ASKPASS_REQUIRE: "never" },
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = "";
    let settled = false;
    const finish = (error: Error | undefined, value?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      if (error !== undefined) reject(error);
      else resolve(value as string);
    };
    const stop = (why: string) => {
      child.kill("SIGKILL");
      finish(new SigningError(`${command}: ${why}`, options.keyFile));
    };
    const timer = setTimeout(() => stop(`no signature after ${timeoutMs} ms`), timeoutMs);
    timer.unref();
    const onAbort = () => stop("interrupted");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) onAbort();
    child.stdout.on("data", (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > MAX_OUTPUT_BYTES) stop(`printed more than ${MAX_OUTPUT_BYTES} bytes`);
      else stdout.push(chunk);
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      if (stderr.length < MAX_OUTPUT_BYTES) stderr += chunk;
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      const why =
        error.code === "ENOENT"
          ? `${tool} was not found: install OpenSSH's ssh-keygen (8.1 or later) to sign`
          : error.message;
      finish(new SigningError(`${command}: ${why}`, options.keyFile, { cause: error }));
    });
    child.on("close", (code, signal) => {
      if (code === 0) {
        finish(undefined, Buffer.concat(stdout).toString("latin1"));
        return;
      }
      const said = stderr
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => line !== "" && line !== "Signing data on standard input")
        .join("; ");
      const status = code === null ? `was killed (${signal})` : `exited with status ${code}`;
      finish(
        new SigningError(
          `${command} ${status}${said === "" ? "" : `: ${said}`} (a key with a passphrase needs a terminal, or an ssh-agent holding it and its .pub file given)`,
          options.keyFile,
        ),
      );
    });
    // The tool may exit before reading everything (a missing key): that is its status's story.
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
  });
}

export interface SignedBundle extends MadeSignature {
  /** The signature file written, `<directory>/manifest.json.sig`. */
  path: string;
}

/**
 * Signs the `manifest.json` of the bundle directory `directory` and writes the signature beside
 * it as `manifest.json.sig`, atomically (a temp file renamed over any previous signature). The
 * written file is read back and checked against the manifest's bytes as they are on disk then, so
 * a manifest changed meanwhile is an error rather than a signature of something else.
 */
export async function signBundleManifest(
  directory: string,
  options: SignOptions,
): Promise<SignedBundle> {
  const manifestPath = join(directory, MANIFEST_FILE_NAME);
  const path = join(directory, SIGNATURE_FILE_NAME);
  const manifest = await readFile(manifestPath);
  const made = await signWithSshKeygen(manifest, options);
  const temp = join(directory, `.${SIGNATURE_FILE_NAME}.${randomBytes(8).toString("hex")}.tmp`);
  try {
    await writeFile(temp, made.armored, { flag: "wx", mode: 0o644 });
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  const [written, now] = await Promise.all([readFile(path), readFile(manifestPath)]);
  const problem = sshsigProblem(parseSshSignature(written), now, made.namespace);
  if (problem !== undefined) {
    throw new SigningError(
      `${path}: the signature written does not verify against ${manifestPath} as it is now (${problem}); was the manifest changed while it was signed?`,
      options.keyFile,
    );
  }
  return { ...made, path };
}
