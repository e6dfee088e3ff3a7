import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BundleValidationError, ManifestError, parseManifest } from "@distributor/bundle";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createManifestWorkflow } from "../../src/validate/manifest-create.js";
import { validateBundlePath } from "../../src/validate/validate.js";

const EXAMPLE_BUNDLE_DIGEST =
  "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-manifest-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("createManifestWorkflow", () => {
  it("writes a manifest listing every file, which then validates", async () => {
    await writeFile(join(root, "report.md"), "# Report\nSunny.\n");

    const report = await createManifestWorkflow({
      path: root,
      id: "reports.example.2026-06-04",
      created: new Date("2026-06-04T13:55:00+02:00"),
    });

    expect(report).toEqual({
      path: root,
      manifest_path: join(root, "manifest.json"),
      id: "reports.example.2026-06-04",
      created: "2026-06-04T11:55:00Z",
      digest: EXAMPLE_BUNDLE_DIGEST,
      files: 1,
      total_size: 16,
      warnings: [],
    });
    const manifest = parseManifest(await readFile(join(root, "manifest.json"), "utf8"));
    expect(manifest.digest).toBe(EXAMPLE_BUNDLE_DIGEST);
    expect((await validateBundlePath({ path: root })).ok).toBe(true);
  });

  it("defaults created to now in whole seconds", async () => {
    await mkdir(join(root, "sub"));
    await writeFile(join(root, "sub", "a.txt"), "a");

    const report = await createManifestWorkflow({
      path: root,
      id: "now",
      now: () => new Date("2026-07-01T10:20:30.999Z"),
    });

    expect(report.created).toBe("2026-07-01T10:20:30Z");
    expect(report.files).toBe(1);
  });

  it("keeps an existing manifest unless forced", async () => {
    await writeFile(join(root, "a.txt"), "a");
    await createManifestWorkflow({ path: root, id: "first" });

    const refusal = await createManifestWorkflow({ path: root, id: "second" }).catch(
      (error: unknown) => error,
    );

    expect(refusal).toBeInstanceOf(BundleValidationError);
    expect(refusal).toMatchObject({ code: "manifest_exists" });
    expect((refusal as Error).message).toBe(
      `${root}: manifest.json already exists; use --force to overwrite it`,
    );
    expect(parseManifest(await readFile(join(root, "manifest.json"), "utf8")).id).toBe("first");

    await createManifestWorkflow({ path: root, id: "second", force: true });
    expect(parseManifest(await readFile(join(root, "manifest.json"), "utf8")).id).toBe("second");
  });

  it("refuses symlinks and names them", async () => {
    await writeFile(join(root, "a.txt"), "a");
    await symlink(join(root, "a.txt"), join(root, "link.txt"));

    const failure = await createManifestWorkflow({ path: root, id: "links" }).catch(
      (error: unknown) => error,
    );

    expect(failure).toBeInstanceOf(BundleValidationError);
    expect((failure as Error).message).toContain(root);
    expect((failure as Error).message).toContain("link.txt");
    await expect(readFile(join(root, "manifest.json"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("refuses an invalid id, naming the directory", async () => {
    await writeFile(join(root, "a.txt"), "a");

    const failure = await createManifestWorkflow({ path: root, id: "-bad" }).catch(
      (error: unknown) => error,
    );

    expect(failure).toBeInstanceOf(ManifestError);
    expect((failure as ManifestError).field).toBe("id");
    expect((failure as Error).message).toMatch(new RegExp(`^${root}: id must match`));
  });

  it("fails for a missing directory", async () => {
    await expect(
      createManifestWorkflow({ path: join(root, "missing"), id: "x" }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
  });
});
