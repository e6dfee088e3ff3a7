import { execFile } from "node:child_process";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeSpecBundle } from "./helpers.js";

// Signed bundles (source.signatures) through the real CLI: `validate --config` and `run` refuse a
// bundle whose manifest.json.sig is missing, invalid or by a key allowed_signers does not trust,
// with the signature's code, naming the bundle and the key, and write nothing. Signatures come
// from the real `ssh-keygen -Y sign`.

const exec = promisify(execFile);

describe("source.signatures", () => {
  const dir = useTempDir();

  /** Keys `producer` and `stranger`, a signed source bundle, allowed_signers and a config. */
  async function setUp(options: { signWith?: string | null; required?: boolean } = {}) {
    const keys = join(dir(), "keys");
    const fingerprints: Record<string, string> = {};
    const publicKeys: Record<string, string> = {};
    await mkdir(keys);
    for (const name of ["producer", "stranger"]) {
      await exec("ssh-keygen", ["-q", "-t", "ecdsa", "-N", "", "-C", name, "-f", join(keys, name)]);
      publicKeys[name] = (await readFile(join(keys, `${name}.pub`), "utf8")).trim();
      const { stdout } = await exec("ssh-keygen", ["-l", "-f", join(keys, `${name}.pub`)]);
      fingerprints[name] = stdout.split(" ")[1] ?? "";
    }
    const source = join(dir(), "source");
    await writeSpecBundle(source);
    const signer = options.signWith === undefined ? "producer" : options.signWith;
    if (signer !== null) await sign(join(source, "manifest.json"), join(keys, signer));
    await writeFile(join(dir(), "allowed_signers"), `ci@example.com ${publicKeys.producer}\n`);
    const config = join(dir(), "distributor.yml");
    const required = options.required === false ? "required: false, " : "";
    await writeFile(
      config,
      `pipelines:
  - id: reports
    source:
      backend: local
      path: ${source}
      signatures: {${required}allowed_signers: ${join(dir(), "allowed_signers")}}
    destinations:
      - {id: archive, backend: local, path: ${join(dir(), "out")}}
`,
    );
    return { source, config, keys, fingerprints };
  }

  async function sign(manifest: string, key: string) {
    await rm(`${manifest}.sig`, { force: true });
    await exec("ssh-keygen", ["-Y", "sign", "-f", key, "-n", "distributor", manifest]);
  }

  const published = () => readdir(join(dir(), "out")).catch(() => [] as string[]);

  it("validate and run accept a bundle signed by an allowed signer; the signature is not published", async () => {
    const { config } = await setUp();
    const validated = await runCli(["validate", "--config", config, "--pipeline", "reports"]);
    expect(validated.stderr).toBe("");
    expect(validated.code).toBe(0);
    const ran = await runCli(["run", "--config", config]);
    expect(ran.stderr).toBe("");
    expect(ran.code).toBe(0);
    expect((await published()).sort()).toEqual([".distributor.json", "report.md"]);
  });

  it("validate refuses a bundle signed by another key: signer_not_allowed, naming the bundle and the key", async () => {
    const { config, fingerprints } = await setUp({ signWith: "stranger" });
    const text = await runCli(["validate", "--config", config, "--pipeline", "reports"]);
    expect(text.code).toBe(1);
    expect(text.stderr).toBe(
      `distributor: bundle .: manifest.json.sig: signed by ecdsa-sha2-nistp256 key ${fingerprints.stranger}, which ${join(dir(), "allowed_signers")} does not allow: the key is not listed\n`,
    );
    const json = await runCli([
      "validate",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--format",
      "json",
    ]);
    expect(envelopeOf(json).error?.code).toBe("signer_not_allowed");
    const bundles = resultOf(json).bundles as Array<{ issues: Array<Record<string, unknown>> }>;
    expect(bundles[0]?.issues).toEqual([
      expect.objectContaining({
        code: "signer_not_allowed",
        path: "manifest.json.sig",
        actual: fingerprints.stranger,
      }),
    ]);
  });

  it("run refuses an unsigned bundle with signature_missing and writes nothing", async () => {
    const { config } = await setUp({ signWith: null });
    const result = await runCli(["run", "--config", config, "--format", "json"]);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("signature_missing");
    expect(envelope.error?.message).toContain("bundle .: manifest.json.sig: missing;");
    expect(await published()).toEqual([]);
  });

  it("run refuses a manifest changed after signing with signature_invalid, naming the key", async () => {
    const { config, source, fingerprints } = await setUp();
    const manifest = join(source, "manifest.json");
    await writeFile(
      manifest,
      (await readFile(manifest, "utf8")).replace("2026-06-04T11:55:00Z", "2026-06-05T11:55:00Z"),
    );
    const result = await runCli(["run", "--config", config]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `bundle .: manifest.json.sig: signature by ecdsa-sha2-nistp256 key ${fingerprints.producer} is not valid for manifest.json: the signature does not verify`,
    );
    const json = envelopeOf(await runCli(["run", "--config", config, "--format", "json"]));
    expect(json.error?.code).toBe("signature_invalid");
    expect(await published()).toEqual([]);
  });

  it("run publishes an unsigned bundle when signatures are not required", async () => {
    const { config } = await setUp({ signWith: null, required: false });
    const result = await runCli(["run", "--config", config]);
    expect(result.code, result.stderr).toBe(0);
    expect(await published()).toContain("report.md");
  });
});
