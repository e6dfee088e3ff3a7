import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend, createMemoryBackend } from "@distributor/storage";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Config, parseConfig } from "../../src/config/index.js";
import { applyPlan } from "../../src/plan-file/apply.js";
import { planRun } from "../../src/run/plan-run.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { validateConfiguredSource } from "../../src/validate/validate.js";

// source.signatures through the workflows: validate, run and apply refuse a bundle whose
// manifest.json.sig is missing, invalid or by a key allowed_signers does not trust, before
// anything is written; signatures are made by the real `ssh-keygen -Y sign`.

const exec = promisify(execFile);
const FILES = { "report.md": "# Report\n", "data.txt": "42\n" };

let keys: string;
const pub: Record<string, string> = {};
const fingerprint: Record<string, string> = {};
let dir: string;

beforeAll(async () => {
  keys = await mkdtemp(join(tmpdir(), "distributor-signing-keys-"));
  for (const name of ["producer", "stranger"]) {
    await exec("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", join(keys, name)]);
    pub[name] = (await readFile(join(keys, `${name}.pub`), "utf8")).trim();
    const { stdout } = await exec("ssh-keygen", ["-l", "-f", join(keys, `${name}.pub`)]);
    fingerprint[name] = stdout.split(" ")[1] ?? "";
  }
}, 30_000);
afterAll(() => rm(keys, { recursive: true, force: true }));

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-signatures-"));
  await writeFile(join(dir, "allowed_signers"), `ci@example.com ${pub.producer}\n`);
  return () => rm(dir, { recursive: true, force: true });
});

async function sign(manifest: string, key = "producer", namespace = "distributor") {
  // ssh-keygen asks before overwriting a signature.
  await rm(`${manifest}.sig`, { force: true });
  await exec("ssh-keygen", ["-Y", "sign", "-f", join(keys, key), "-n", namespace, manifest]);
}

/** A source directory holding one bundle at its root, signed by `key` unless null. */
async function source(key: string | null = "producer"): Promise<string> {
  const root = join(dir, "source");
  await writeSourceBundle(createLocalBackend({ root }), "", FILES);
  if (key !== null) await sign(join(root, "manifest.json"), key);
  return root;
}

function config(from: string, signatures = "{allowed_signers: allowed_signers}"): Config {
  return parseConfig(
    `pipelines:
  - id: reports
    source: {backend: local, path: ${from}, signatures: ${signatures}}
    destinations: [{id: archive, backend: local, path: ${join(dir, "out")}}]
`,
    { cwd: dir, sourceName: join(dir, "distributor.yml") },
  );
}

const published = () => readdir(join(dir, "out")).catch(() => [] as string[]);
const recordedSource = async () =>
  JSON.parse(await readFile(join(dir, "out", ".distributor.json"), "utf8")).source;

describe("validateConfiguredSource under source.signatures", () => {
  it("accepts a bundle signed by an allowed signer", async () => {
    const report = await validateConfiguredSource({
      config: config(await source()),
      pipelineId: "reports",
    });
    expect(report.ok).toBe(true);
  });

  it.each([
    ["unsigned", null, "signature_missing"],
    ["signed by a stranger", "stranger", "signer_not_allowed"],
  ] as const)("refuses a bundle %s: %s", async (_name, key, code) => {
    const report = await validateConfiguredSource({
      config: config(await source(key)),
      pipelineId: "reports",
    });
    expect(report.ok).toBe(false);
    expect(report.bundles[0]?.issues.map((issue) => [issue.code, issue.path])).toEqual([
      [code, "manifest.json.sig"],
    ]);
  });

  it("fails as config_invalid naming the line of an allowed_signers file it cannot use", async () => {
    await writeFile(
      join(dir, "allowed_signers"),
      `# CA\n*@example.com cert-authority ${pub.producer}\n`,
    );
    await expect(
      validateConfiguredSource({ config: config(await source()), pipelineId: "reports" }),
    ).rejects.toMatchObject({
      code: "config_invalid",
      message: `source.signatures.allowed_signers: ${join(dir, "allowed_signers")}:2: cert-authority is not supported: distributor verifies signatures by plain keys, not certificates; list each signer's public key instead`,
    });
  });
});

describe("run under source.signatures", () => {
  it("publishes a signed bundle, never the signature, and records the signer in the state", async () => {
    const report = await run({ config: config(await source()) });
    expect(runSucceeded(report), JSON.stringify(report)).toBe(true);
    expect((await published()).sort()).toEqual([".distributor.json", "data.txt", "report.md"]);
    expect((await recordedSource()).signer).toEqual({
      principal: "ci@example.com",
      fingerprint: fingerprint.producer,
    });
  });

  it("refuses a manifest changed after signing before writing anything: signature_invalid", async () => {
    const root = await source();
    const manifest = join(root, "manifest.json");
    await writeFile(manifest, (await readFile(manifest, "utf8")).replace("\n}", "}"));
    const report = await run({ config: config(root) });
    expect(report.pipeline_errors).toEqual([
      expect.objectContaining({ pipeline_id: "reports", code: "signature_invalid" }),
    ]);
    expect(report.pipeline_errors[0]?.message).toMatch(
      /^bundle \.: manifest\.json\.sig: signature by ssh-ed25519 key SHA256:\S+ is not valid for manifest\.json: the signature does not verify$/,
    );
    expect(await published()).toEqual([]);
  });

  it("refuses a signature made in another namespace, and accepts it once configured", async () => {
    const root = await source(null);
    await sign(join(root, "manifest.json"), "producer", "git");
    const refused = await run({ config: config(root) });
    expect(refused.pipeline_errors.map((error) => error.code)).toEqual(["signature_invalid"]);
    const configured = "{allowed_signers: allowed_signers, namespace: git}";
    expect(runSucceeded(await run({ config: config(root, configured) }))).toBe(true);
  });

  it("refuses a signer past its valid-before", async () => {
    await writeFile(join(dir, "allowed_signers"), `ci valid-before="20200101Z" ${pub.producer}\n`);
    const report = await run({ config: config(await source()) });
    expect(report.pipeline_errors.map((error) => error.code)).toEqual(["signer_not_allowed"]);
    expect(report.pipeline_errors[0]?.message).toContain("has expired: valid-before 2020-01-01");
    expect(await published()).toEqual([]);
  });

  it("publishes an unsigned bundle when signatures are not required", async () => {
    const root = await source(null);
    const optional = "{required: false, allowed_signers: allowed_signers}";
    expect(runSucceeded(await run({ config: config(root, optional) }))).toBe(true);
    expect(await published()).toContain("report.md");
    expect(await recordedSource()).not.toHaveProperty("signer");
  });

  it("reads the signature through the source's backend (a memory source)", async () => {
    const root = await source();
    const memory = createMemoryBackend();
    for (const name of ["manifest.json", "manifest.json.sig", ...Object.keys(FILES)]) {
      await memory.writeFile(name, await readFile(join(root, name)));
    }
    const ok = await run({ config: config(root), sources: { reports: memory } });
    expect(runSucceeded(ok), JSON.stringify(ok)).toBe(true);
    await memory.writeFile("manifest.json.sig", "-----BEGIN SSH SIGNATURE-----\nU1NI\n", {
      overwrite: true,
    });
    const bad = await run({ config: config(root), sources: { reports: memory } });
    expect(bad.pipeline_errors.map((error) => error.code)).toEqual(["signature_invalid"]);
  });
});

describe("apply under source.signatures", () => {
  it("applies a plan of a signed bundle and records its signer, as run does", async () => {
    const cfg = config(await source());
    const { plan } = await planRun({ config: cfg });
    if (plan === null) throw new Error("no plan");
    const applied = await applyPlan({ plan, config: cfg });
    expect(applied.actions.map((action) => [action.action, action.error])).toEqual([
      ["publish_new", null],
    ]);
    expect((await recordedSource()).signer?.fingerprint).toBe(fingerprint.producer);
  });

  it("refuses a planned bundle whose signature was replaced since the plan", async () => {
    const root = await source();
    const cfg = config(root);
    const { plan } = await planRun({ config: cfg });
    if (plan === null) throw new Error("no plan");
    await sign(join(root, "manifest.json"), "stranger");
    const applied = await applyPlan({ plan, config: cfg });
    expect(applied.actions.map((action) => action.error?.code)).toEqual(["signer_not_allowed"]);
    expect(await published()).toEqual([]);
  });
});
