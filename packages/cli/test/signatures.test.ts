import { execFile } from "node:child_process";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  resultOf,
  runCli,
  startServe,
  useTempDir,
  writeFiles,
  writeSpecBundle,
} from "./helpers.js";

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

  it("validate <path> --allowed-signers checks the signature without a configuration", async () => {
    const { source, fingerprints } = await setUp();
    const allowed = join(dir(), "allowed_signers");
    const passed = await runCli(["validate", "--allowed-signers", allowed, source]);
    expect(passed.stderr).toBe("");
    expect(passed.code).toBe(0);

    const otherNamespace = await runCli([
      "validate",
      "--allowed-signers",
      allowed,
      "--signature-namespace",
      "releases",
      "--format",
      "json",
      source,
    ]);
    expect(otherNamespace.code).toBe(1);
    expect(envelopeOf(otherNamespace).error?.code).toBe("signature_invalid");

    await writeFile(
      allowed,
      `ci@example.com ${(await readFile(join(dir(), "keys", "stranger.pub"), "utf8")).trim()}\n`,
    );
    const refused = await runCli([
      "validate",
      "--allowed-signers",
      allowed,
      "--format",
      "json",
      source,
    ]);
    expect(refused.code).toBe(1);
    expect(envelopeOf(refused).error?.code).toBe("signer_not_allowed");
    expect(envelopeOf(refused).error?.message).toContain(fingerprints.producer);

    await rm(join(source, "manifest.json.sig"));
    const unsigned = await runCli([
      "validate",
      "--allowed-signers",
      allowed,
      "--format",
      "json",
      source,
    ]);
    expect(envelopeOf(unsigned).error?.code).toBe("signature_missing");
    // Without --allowed-signers a path is checked as before: a signature is not required.
    expect((await runCli(["validate", source])).code).toBe(0);

    const missingFile = await runCli([
      "validate",
      "--allowed-signers",
      join(dir(), "nowhere"),
      "--format",
      "json",
      source,
    ]);
    expect(missingFile.code).toBe(1);
    expect(envelopeOf(missingFile).error?.code).toBe("allowed_signers_invalid");
    expect(envelopeOf(missingFile).error?.message).toContain(
      `--allowed-signers: cannot read ${join(dir(), "nowhere")}`,
    );
  });

  it("validate refuses --allowed-signers with --config and --signature-namespace alone", async () => {
    const { source, config } = await setUp();
    const withConfig = await runCli([
      "validate",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--allowed-signers",
      join(dir(), "allowed_signers"),
    ]);
    expect(withConfig.code).toBe(2);
    expect(withConfig.stderr).toContain(
      "--allowed-signers and --signature-namespace go with a path",
    );
    const alone = await runCli(["validate", "--signature-namespace", "x", source]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("validate --signature-namespace needs --allowed-signers <file>");
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

  it("manifest create --sign writes a signature ssh-keygen -Y verify accepts, and run publishes the bundle", async () => {
    const { config, source, keys, fingerprints } = await setUp({ signWith: null });
    const made = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.example.2026-06-04",
      "--force",
      "--sign",
      join(keys, "producer"),
      "--format",
      "json",
      source,
    ]);
    expect(made.code, made.stderr).toBe(0);
    expect(resultOf(made).signature).toEqual({
      path: join(source, "manifest.json.sig"),
      fingerprint: fingerprints.producer,
      key_type: "ecdsa-sha2-nistp256",
      namespace: "distributor",
    });
    await exec("sh", [
      "-c",
      `ssh-keygen -Y verify -f "$1" -I ci@example.com -n distributor -s "$2" < "$3"`,
      "verify",
      join(dir(), "allowed_signers"),
      join(source, "manifest.json.sig"),
      join(source, "manifest.json"),
    ]);
    const ran = await runCli(["run", "--config", config, "--format", "json"]);
    expect(ran.code, ran.stderr).toBe(0);
    expect((await published()).sort()).toEqual([".distributor.json", "report.md"]);
    const signer = { principal: "ci@example.com", fingerprint: fingerprints.producer };
    expect((resultOf(ran).actions as Array<{ signer: unknown }>)[0]?.signer).toEqual(signer);
    const skipped = await runCli(["run", "--config", config, "--format", "json"]);
    expect((resultOf(skipped).actions as Array<{ signer: unknown }>)[0]?.signer).toEqual(signer);
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stderr).toBe(0);
    expect(audited.stdout).toContain(
      `incomplete=0 signer=ci@example.com signer_key=${fingerprints.producer}\n`,
    );
    const inspected = await runCli(["inspect", join(dir(), "out")]);
    expect(inspected.code, inspected.stderr).toBe(0);
    expect(inspected.stdout).toContain(
      `signer=ci@example.com signer_key=${fingerprints.producer} outputs=1`,
    );

    // Written again without --sign, the old signature is stale: the command says so, run refuses.
    const unsigned = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.again",
      "--force",
      source,
    ]);
    expect(unsigned.code, unsigned.stderr).toBe(0);
    expect(unsigned.stderr).toContain("manifest.json.sig signs an earlier manifest");
  });

  it("manifest create --sign with a key that cannot sign fails with signing_failed and leaves no signature", async () => {
    const { source } = await setUp({ signWith: null });
    const missing = join(dir(), "keys", "nobody");
    const made = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.example.2026-06-04",
      "--force",
      "--sign",
      missing,
      "--format",
      "json",
      source,
    ]);
    expect(made.code).toBe(1);
    expect(envelopeOf(made).error?.code).toBe("signing_failed");
    expect(envelopeOf(made).error?.message).toContain(`ssh-keygen -Y sign -f ${missing}`);
    expect(await readdir(source)).not.toContain("manifest.json.sig");
    const usage = await runCli([
      "manifest",
      "create",
      "--id",
      "x",
      "--signature-namespace",
      "n",
      source,
    ]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--signature-namespace needs --sign");
  });

  it("upload --sign through serve publishes under required signatures; an unsigned upload gets 422 signature_missing", async () => {
    const { keys } = await setUp({ signWith: null });
    const site = join(dir(), "site");
    const config = join(dir(), "serve.yml");
    await writeFile(
      config,
      `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(dir(), "staging")}
  store:
    path: ${join(dir(), "store")}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source:
      backend: http_upload
      signatures: {allowed_signers: ${join(dir(), "allowed_signers")}}
    destinations:
      - {id: site, backend: local, path: ${site}}
`,
    );
    const env = {
      REPORTER_TOKEN: "signed-upload-token",
      DISTRIBUTOR_UPLOAD_TOKEN: "signed-upload-token",
    };
    const serving = await startServe(config, { cwd: dir(), env });
    try {
      const bundle = join(dir(), "bundle");
      await writeFiles(bundle, { "report.md": "# Signed\n" });
      const created = await runCli(["manifest", "create", "--id", "reports.signed", bundle]);
      expect(created.code, created.stderr).toBe(0);
      const upload = (...extra: string[]) =>
        runCli(
          [
            "upload",
            "--server",
            serving.url,
            "--pipeline",
            "reports",
            "--wait",
            "--format",
            "json",
            ...extra,
            bundle,
          ],
          { env },
        );
      const refused = await upload();
      expect(refused.code).toBe(1);
      expect(envelopeOf(refused).error?.code).toBe("signature_missing");
      expect(await readdir(site).catch(() => [])).toEqual([]);

      const signed = await upload("--sign", join(keys, "producer"));
      expect(signed.code, signed.stdout + signed.stderr).toBe(0);
      expect(await readdir(bundle)).toContain("manifest.json.sig");
      expect(await readFile(join(site, "report.md"), "utf8")).toBe("# Signed\n");
      expect((await readdir(site)).sort()).toEqual([".distributor.json", "report.md"]);
    } finally {
      serving.child.kill("SIGTERM");
      await serving.exited;
    }
  }, 60_000);
});
