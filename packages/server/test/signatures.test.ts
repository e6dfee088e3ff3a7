import { execFile } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Config } from "@distributor/publish";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  packDirectory,
  type Running,
  startServer,
  tree,
  upload,
  uploadConfig,
  waitForRun,
  workspace,
  writeBundle,
} from "./helpers.js";

// serve under source.signatures: an upload whose archive does not carry a valid manifest.json.sig
// by an allowed signer is answered 422 with the signature's code, and nothing is queued or
// published; a signed one publishes. Real HTTP, real ssh-keygen signatures.

const exec = promisify(execFile);
let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running | undefined;
let config: Config;

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
  for (const name of ["producer", "stranger"]) {
    await exec("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", join(root, name)]);
  }
  const producer = (await readFile(join(root, "producer.pub"), "utf8")).trim();
  await writeFile(join(root, "allowed_signers"), `ci@example.com ${producer}\n`);
  const base = uploadConfig(root);
  config = {
    ...base,
    pipelines: base.pipelines.map((pipeline) =>
      pipeline.id === "reports"
        ? {
            ...pipeline,
            source: {
              ...pipeline.source,
              signatures: {
                required: true,
                allowedSigners: join(root, "allowed_signers"),
                namespace: "distributor",
              },
            },
          }
        : pipeline,
    ),
  };
  running = await startServer(config);
});

afterEach(async () => {
  await running?.server.close();
  running = undefined;
  await removeWorkspace();
});

/** A packed bundle, its manifest signed by `key` unless null. */
async function archive(key: string | null): Promise<Buffer> {
  const directory = await mkdtemp(join(root, "bundle-"));
  await writeBundle(directory, "reports.signed", { "report.md": "# Report\n" });
  if (key !== null) {
    await exec("ssh-keygen", [
      "-Y",
      "sign",
      "-f",
      join(root, key),
      "-n",
      "distributor",
      join(directory, "manifest.json"),
    ]);
  }
  return packDirectory(directory);
}

describe("serve with source.signatures", () => {
  it("does not start with an allowed_signers file it cannot use, naming the file and line", async () => {
    await writeFile(
      join(root, "allowed_signers"),
      "ci@example.com cert-authority ssh-ed25519 AAAA\n",
    );
    await expect(startServer(config)).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringContaining(
        `${join(root, "allowed_signers")}:1: cert-authority is not supported`,
      ),
    });
  });

  it("accepts and publishes a signed upload, without its signature, recording the signer", async () => {
    const { url } = running!;
    const accepted = await upload(url, await archive("producer"));
    expect(accepted.status, JSON.stringify(accepted.json)).toBe(202);
    const record = await waitForRun(url, String(accepted.json.run_id));
    expect(record.status).toBe("succeeded");
    expect(await tree(join(root, "site"))).toEqual([".distributor.json", "report.md"]);
    const state = JSON.parse(await readFile(join(root, "site", ".distributor.json"), "utf8"));
    expect(state.source.signer.principal).toBe("ci@example.com");
  });

  it.each([
    ["unsigned", null, "signature_missing"],
    ["signed by a key not allowed", "stranger", "signer_not_allowed"],
  ] as const)(
    "answers 422 to an upload %s: %s, and publishes nothing",
    async (_name, key, code) => {
      const { url } = running!;
      const refused = await upload(url, await archive(key));
      expect(refused.status).toBe(422);
      expect(refused.json.error).toMatchObject({ code });
      expect((refused.json.error as { message: string }).message).toContain("manifest.json.sig");
      expect(await tree(join(root, "site"))).toEqual([]);
    },
  );
});
