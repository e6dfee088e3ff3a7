import { access, readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

// The global setup has built this package and everything it depends on, i.e. every package.
const packagesDir = fileURLToPath(new URL("../../", import.meta.url));

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  engines?: { node?: string };
  repository?: { type?: string; url?: string; directory?: string };
  type?: string;
  files?: string[];
  bin?: Record<string, string>;
  exports?: Record<string, string | { types?: string; default?: string }>;
  dependencies?: Record<string, string>;
}

async function manifests(): Promise<[string, Manifest][]> {
  const names = (await readdir(packagesDir)).sort();
  return Promise.all(
    names.map(async (name) => {
      const dir = join(packagesDir, name);
      return [dir, JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as Manifest];
    }),
  );
}

describe("published package layout", () => {
  it("every export and bin points at built files that load", async () => {
    for (const [dir, manifest] of await manifests()) {
      // A private package (the end-to-end suites) is never packed.
      if (manifest.private === true) continue;
      expect(manifest.type, manifest.name).toBe("module");
      expect(manifest.files?.[0], manifest.name).toBe("dist");
      for (const entry of manifest.files ?? []) await access(join(dir, entry));
      for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
        if (typeof target === "string") {
          await access(join(dir, target));
          continue;
        }
        expect(target.types, `${manifest.name} ${subpath}`).toMatch(/^\.\/dist\/.*\.d\.ts$/);
        expect(target.default, `${manifest.name} ${subpath}`).toMatch(/^\.\/dist\/.*\.js$/);
        await access(join(dir, target.types as string));
        const loaded = await import(pathToFileURL(join(dir, target.default as string)).href);
        expect(Object.keys(loaded).length, `${manifest.name} ${subpath} exports`).toBeGreaterThan(
          0,
        );
      }
      for (const path of Object.values(manifest.bin ?? {})) {
        expect(path).toMatch(/^\.\/dist\//);
        expect((await readFile(join(dir, path), "utf8")).startsWith("#!/usr/bin/env node")).toBe(
          true,
        );
      }
    }
  });

  it("workspace dependencies use the workspace protocol", async () => {
    for (const [, manifest] of await manifests()) {
      for (const [name, range] of Object.entries(manifest.dependencies ?? {})) {
        if (name.startsWith("@distributor/"))
          expect(range, `${manifest.name} → ${name}`).toBe("workspace:^");
      }
    }
  });

  it("every package carries the metadata users and registries read", async () => {
    const root = JSON.parse(await readFile(join(packagesDir, "..", "package.json"), "utf8")) as {
      engines: { node: string };
    };
    const urls = new Set<string>();
    for (const [dir, manifest] of await manifests()) {
      if (manifest.private === true) continue;
      const name = manifest.name;
      expect(manifest.license, name).toBe("MIT");
      expect(manifest.engines?.node, name).toBe(root.engines.node);
      expect(manifest.repository?.type, name).toBe("git");
      expect(manifest.repository?.directory, name).toBe(`packages/${basename(dir)}`);
      urls.add(manifest.repository?.url ?? "");
      // npm packs README and LICENSE whatever `files` says.
      expect((await readFile(join(dir, "README.md"), "utf8")).startsWith(`# ${name}\n`)).toBe(true);
      await access(join(dir, "LICENSE"));
    }
    expect([...urls]).toHaveLength(1);
  });

  it("every published package has a version of its own and a changelog that ships with it", async () => {
    for (const [dir, manifest] of await manifests()) {
      if (manifest.private === true) continue;
      const name = manifest.name;
      expect(manifest.version, name).not.toBe("0.0.0");
      expect(manifest.files, name).toContain("CHANGELOG.md");
      const changelog = await readFile(join(dir, "CHANGELOG.md"), "utf8");
      expect(changelog.startsWith(`# ${name}\n`), name).toBe(true);
      expect(changelog, name).toContain(`\n## ${manifest.version}\n`);
    }
  });
});
