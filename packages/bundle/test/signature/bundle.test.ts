import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createLocalBackend, createMemoryBackend, type StorageBackend } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractArchive } from "../../src/archive/extract.js";
import { packBundle } from "../../src/archive/pack.js";
import { createManifest } from "../../src/create.js";
import { BundleValidationError, ManifestError } from "../../src/errors.js";
import { buildManifest, parseManifest } from "../../src/manifest.js";
import { parseAllowedSigners } from "../../src/signature/allowed-signers.js";
import { readSignedManifest, type SignaturePolicy } from "../../src/signature/verify.js";
import { validateBundle } from "../../src/validate.js";
import { rejectionOf, TempDirs, writeBundle } from "../helpers.js";
import { makeKey, sshSign, type TestKey } from "../ssh-keygen.js";

// manifest.json.sig as part of a bundle: beside the manifest, never listed, never an unlisted
// file, packed into upload archives, and checked before the manifest is trusted.

const dirs = new TempDirs();
let keyDir: string;
let producer: TestKey;
let stranger: TestKey;
const FILES = { "report.md": "# Report\nSunny.\n", "data/table.csv": "a,b\n1,2\n" };

beforeAll(async () => {
  keyDir = await dirs.make();
  [producer, stranger] = await Promise.all([
    makeKey(keyDir, "producer", "ed25519"),
    makeKey(keyDir, "stranger", "ed25519"),
  ]);
}, 30_000);

afterAll(() => dirs.cleanup());

function policy(overrides: Partial<SignaturePolicy> = {}): SignaturePolicy {
  return {
    required: true,
    namespace: "distributor",
    allowedSigners: parseAllowedSigners(`ci@example.com ${producer.publicLine}\n`, "signers"),
    allowedSignersSource: "signers",
    ...overrides,
  };
}

/** A bundle at `root/bundle`, its manifest signed by `key` unless `key` is null. */
async function signedBundle(key: TestKey | null = producer): Promise<string> {
  const root = await dirs.make();
  await writeBundle(root, "bundle", FILES);
  if (key !== null) await sshSign(join(root, "bundle", "manifest.json"), key);
  return root;
}

async function refusal(action: () => Promise<unknown>): Promise<BundleValidationError> {
  const error = await rejectionOf(action);
  if (!(error instanceof BundleValidationError)) throw error;
  return error;
}

describe("validateBundle with manifest.json.sig", () => {
  it("accepts the signature beside the manifest as part of the bundle, signatures checked or not", async () => {
    const backend = createLocalBackend({ root: await signedBundle() });
    const plain = await validateBundle(backend, "bundle");
    expect(plain.unlistedFiles).toEqual([]);
    expect(plain.signer).toBeUndefined();
    const ignoring = await validateBundle(backend, "bundle", { unlistedFiles: "ignore" });
    expect(ignoring.unlistedFiles).toEqual([]);
    const checked = await validateBundle(backend, "bundle", { signatures: policy() });
    expect(checked.signer).toEqual({
      principal: "ci@example.com",
      fingerprint: producer.fingerprint,
      keyType: "ssh-ed25519",
    });
  });

  it("still refuses a manifest.json.sig below the bundle root as an unlisted file", async () => {
    const root = await signedBundle();
    await mkdir(join(root, "bundle", "data", "x"), { recursive: true });
    await writeFile(join(root, "bundle", "data", "manifest.json.sig"), "stray");
    const error = await refusal(() => validateBundle(createLocalBackend({ root }), "bundle"));
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unlisted_file", "data/manifest.json.sig"],
    ]);
  });

  it("refuses an unsigned bundle, naming the bundle: signature_missing", async () => {
    const backend = createLocalBackend({ root: await signedBundle(null) });
    const error = await refusal(() => validateBundle(backend, "bundle", { signatures: policy() }));
    expect(error.code).toBe("signature_missing");
    expect(error.message).toMatch(/^bundle bundle: manifest\.json\.sig: missing; /);
  });

  it("refuses a bundle signed by another key, naming its fingerprint: signer_not_allowed", async () => {
    const backend = createLocalBackend({ root: await signedBundle(stranger) });
    const error = await refusal(() => validateBundle(backend, "bundle", { signatures: policy() }));
    expect(error.code).toBe("signer_not_allowed");
    expect(error.message).toContain(stranger.fingerprint);
    expect(error.issues[0]?.actual).toBe(stranger.fingerprint);
  });

  it("refuses a manifest changed after signing before reading any file: signature_invalid", async () => {
    const root = await signedBundle();
    const path = join(root, "bundle", "manifest.json");
    // Reformatted, same content: the signature covers bytes, not the parsed manifest.
    const manifest = parseManifest(await readFile(path, "utf8"));
    await writeFile(path, `${JSON.stringify({ ...JSON.parse(await readFile(path, "utf8")) })}\n`);
    expect(parseManifest(await readFile(path, "utf8")).digest).toBe(manifest.digest);
    const read: string[] = [];
    const local = createLocalBackend({ root });
    const backend: StorageBackend = {
      ...local,
      readFile: (file, options) => {
        read.push(file);
        return local.readFile(file, options);
      },
    };
    const error = await refusal(() => validateBundle(backend, "bundle", { signatures: policy() }));
    expect(error.code).toBe("signature_invalid");
    expect(error.message).toContain(producer.fingerprint);
    expect(read).toEqual(["bundle/manifest.json", "bundle/manifest.json.sig"]);
  });

  it("reports a changed file as before once the signature holds: sha256_mismatch", async () => {
    const root = await signedBundle();
    await writeFile(join(root, "bundle", "report.md"), "# Report\nRainy.\n");
    const error = await refusal(() =>
      validateBundle(createLocalBackend({ root }), "bundle", { signatures: policy() }),
    );
    expect(error.code).toBe("sha256_mismatch");
  });

  it("refuses a signature file that is a directory: signature_invalid", async () => {
    const root = await signedBundle(null);
    await mkdir(join(root, "bundle", "manifest.json.sig"));
    const error = await refusal(() =>
      readSignedManifest(createLocalBackend({ root }), "bundle", policy({ required: false })),
    );
    expect(error.code).toBe("signature_invalid");
  });

  it("reads the signature through any backend: a memory source", async () => {
    const root = await signedBundle();
    const memory = createMemoryBackend();
    for (const name of ["manifest.json", "manifest.json.sig", "report.md", "data/table.csv"]) {
      await memory.writeFile(`bundle/${name}`, await readFile(join(root, "bundle", name)));
    }
    const { signer } = await readSignedManifest(memory, "bundle", policy());
    expect(signer?.fingerprint).toBe(producer.fingerprint);
  });

  it("refuses to pass both a manifest and a signature policy", async () => {
    const backend = createLocalBackend({ root: await signedBundle() });
    const { manifest } = await readSignedManifest(backend, "bundle", policy());
    await expect(
      validateBundle(backend, "bundle", { manifest, signatures: policy() }),
    ).rejects.toThrow(TypeError);
  });
});

describe("manifest.json.sig around the bundle", () => {
  it("is never listed by manifest create, and may not be listed by hand", async () => {
    const root = await signedBundle();
    const { manifest } = await createManifest(createLocalBackend({ root }), "bundle", {
      id: "reports.example",
      force: true,
      dryRun: true,
    });
    expect(manifest.files.map((file) => file.path)).toEqual(["data/table.csv", "report.md"]);
    const listing = () =>
      buildManifest({
        id: "x",
        created: new Date(),
        files: [{ path: "manifest.json.sig", sha256: `sha256:${"0".repeat(64)}`, size: 1 }],
      });
    expect(listing).toThrow(ManifestError);
    expect(listing).toThrow("manifest's signature, which cannot be listed in what it signs");
  });

  it("travels in the upload archive and comes out beside the manifest", async () => {
    const root = await signedBundle();
    const packed = await packBundle(join(root, "bundle"));
    const staging = await dirs.make();
    await extractArchive(packed.stream, staging, { maxExtractedSize: 1_000_000, maxEntries: 100 });
    expect((await readdir(staging)).sort()).toEqual([
      "data",
      "manifest.json",
      "manifest.json.sig",
      "report.md",
    ]);
    const { signer } = await readSignedManifest(
      createLocalBackend({ root: staging }),
      "",
      policy(),
    );
    expect(signer?.principal).toBe("ci@example.com");
  });
});
