import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { publint } from "publint";
import { formatMessage } from "publint/utils";
import semver from "semver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeLibraryErrors } from "./library-errors.js";

/*
 * The packages as users receive them: every public package under packages/ (found by listing the
 * directory, so new packages are covered when they land) is built, packed with `pnpm pack` and
 * installed from its tarball into a fresh project with `npm`, which knows nothing of the
 * workspace. The installed packages must load, their `exports` must point at shipped files, their
 * imports must be declared dependencies, and the installed `distributor` must work.
 */

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  bin?: Record<string, string>;
  exports?: Record<string, string | Record<string, string>>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  engines?: { node?: string };
}

const packages = readdirSync(join(root, "packages"))
  .sort()
  .map((name) => {
    const manifest = JSON.parse(
      readFileSync(join(root, "packages", name, "package.json"), "utf8"),
    ) as Manifest;
    return { dir: join(root, "packages", name), manifest };
  })
  .filter(({ manifest }) => manifest.private !== true);
const names = packages.map(({ manifest }) => manifest.name);

let work = "";
let project = "";
const tarballs = new Map<string, { file: string; files: string[] }>();

async function exec(command: string, args: string[], cwd: string) {
  try {
    return await run(command, args, { cwd, maxBuffer: 64 * 1024 * 1024, env: plainEnv() });
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(" ")} failed in ${cwd}:\n${stdout}${stderr}`);
  }
}

/** The environment without the npm and pnpm settings pnpm passes to scripts, which npm would obey. */
function plainEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key.startsWith("npm_") || key.startsWith("PNPM_") || key.startsWith("VITEST")) {
      delete env[key];
    }
  }
  return env;
}

function installed(name: string): string {
  return join(project, "node_modules", ...name.split("/"));
}

beforeAll(async () => {
  await exec(
    join(root, "node_modules", ".bin", "turbo"),
    ["run", "build", "--output-logs=errors-only"],
    root,
  );
  work = await mkdtemp(join(tmpdir(), "distributor-packaging-"));
  const packed = join(work, "tarballs");
  for (const { dir, manifest } of packages) {
    const { stdout } = await exec("pnpm", ["pack", "--json", "--pack-destination", packed], dir);
    const report = JSON.parse(stdout) as { filename: string; files: { path: string }[] };
    tarballs.set(manifest.name, { file: report.filename, files: report.files.map((f) => f.path) });
  }

  project = join(work, "project");
  await mkdir(project);
  await writeFile(
    join(project, "package.json"),
    `${JSON.stringify({ name: "packaging-check", private: true, type: "module" }, null, 2)}\n`,
  );
  // Peers (optional ones too) are installed so that entry points needing them can load, in the
  // range the packed manifest gives (`pnpm pack` replaces `catalog:` with the workspace catalog's).
  const peers = new Set<string>();
  for (const { manifest } of packages) {
    for (const [name, range] of Object.entries(manifest.peerDependencies ?? {})) {
      if (!names.includes(name)) peers.add(`${name}@${fromCatalog(name, range)}`);
    }
  }
  await exec(
    "npm",
    [
      "install",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      "--no-package-lock",
      ...[...tarballs.values()].map(({ file }) => file),
      ...peers,
    ],
    project,
  );
}, 300_000);

afterAll(async () => {
  if (work !== "") await rm(work, { recursive: true, force: true });
});

describe.each(packages.map(({ manifest }) => [manifest.name, manifest] as const))(
  "%s",
  (name, manifest) => {
    it("ships every file its exports and bin name, its README and its LICENSE", () => {
      const files = tarballs.get(name)?.files ?? [];
      expect(files).toContain("package.json");
      expect(files).toContain("README.md");
      expect(files).toContain("LICENSE");
      for (const target of entryTargets(manifest)) {
        expect(files, `${name}: ${target}`).toContain(target.replace(/^\.\//, ""));
      }
    });

    it("loads every entry point from plain ESM in the installed copy", async () => {
      const script = join(project, `import-${name.replace(/\W/g, "_")}.mjs`);
      const subpaths = Object.keys(manifest.exports ?? {});
      await writeFile(
        script,
        `import { readFile } from "node:fs/promises";
const report = {};
for (const subpath of ${JSON.stringify(subpaths)}) {
  const specifier = ${JSON.stringify(name)} + subpath.slice(1);
  if (subpath.endsWith(".json")) {
    const text = await readFile(new URL(import.meta.resolve(specifier)), "utf8");
    report[subpath] = Object.keys(JSON.parse(text)).length;
  } else {
    report[subpath] = Object.keys(await import(specifier)).length;
  }
}
console.log(JSON.stringify(report));
`,
      );
      const { stdout } = await exec(process.execPath, [script], project);
      const report = JSON.parse(stdout) as Record<string, number>;
      expect(Object.keys(report).sort()).toEqual([...subpaths].sort());
      for (const [subpath, count] of Object.entries(report)) {
        expect(count, `${name} ${subpath} exports nothing`).toBeGreaterThan(0);
      }
    });

    it("declares every package its built code imports", async () => {
      const declared = new Set([
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
      ]);
      const undeclared = new Set<string>();
      const files = (tarballs.get(name)?.files ?? []).filter((file) => file.endsWith(".js"));
      for (const file of files) {
        const code = await readFile(join(installed(name), file), "utf8");
        for (const specifier of importedSpecifiers(code)) {
          if (specifier.startsWith(".") || specifier.startsWith("node:")) continue;
          if (builtinModules.includes(specifier)) continue;
          const packageName = specifier.startsWith("@")
            ? specifier.split("/").slice(0, 2).join("/")
            : (specifier.split("/")[0] ?? specifier);
          if (!declared.has(packageName)) undeclared.add(`${packageName} (${file})`);
        }
      }
      expect([...undeclared]).toEqual([]);
    });

    it("passes publint", async () => {
      const tarball = await readFile(tarballs.get(name)?.file ?? "");
      const { messages, pkg } = await publint({
        pack: {
          tarball: tarball.buffer.slice(
            tarball.byteOffset,
            tarball.byteOffset + tarball.byteLength,
          ),
        },
        strict: true,
      });
      expect(messages.map((message) => formatMessage(message, pkg) ?? message.code)).toEqual([]);
    });

    it("passes are-the-types-wrong (ESM only)", async () => {
      const attw = join(root, "node_modules", ".bin", "attw");
      const file = tarballs.get(name)?.file ?? "";
      // Exits non-zero and lists the problems when it finds any.
      await exec(
        attw,
        [file, "--profile", "esm-only", "--format", "ascii", "--no-emoji", "--no-color"],
        work,
      );
    });
  },
);

describe("dependencies", () => {
  it("support every Node version the packages' engines allow", async () => {
    const ranges = new Set(packages.map(({ manifest }) => manifest.engines?.node ?? ""));
    expect([...ranges]).toHaveLength(1);
    const ours = [...ranges][0] ?? "";
    const narrower: string[] = [];
    for (const file of await installedManifests(join(project, "node_modules"))) {
      const dependency = JSON.parse(await readFile(file, "utf8")) as Manifest;
      const theirs = dependency.engines?.node;
      if (theirs === undefined || names.includes(dependency.name)) continue;
      // A dependency that dropped a Node line we still name must be held back (or engines raised).
      if (!semver.subset(ours, theirs))
        narrower.push(`${dependency.name}@${dependency.version}: ${theirs}`);
    }
    expect(narrower).toEqual([]);
  });
});

describe("the installed distributor binary", () => {
  const cli = packages.find(({ manifest }) => manifest.bin?.distributor !== undefined)?.manifest;
  const bin = () => join(project, "node_modules", ".bin", "distributor");

  it("is provided by one package", () => {
    expect(cli?.name).toBe("@distributor/cli");
  });

  it("prints its help and version", async () => {
    const help = await exec(bin(), ["--help"], project);
    expect(help.stdout).toContain("distributor run");
    const version = await exec(bin(), ["--version"], project);
    expect(version.stdout).toBe(`distributor ${cli?.version}\n`);
  });

  it("publishes a small bundle to a local destination", async () => {
    const bundle = join(work, "bundle");
    await mkdir(join(bundle, "details"), { recursive: true });
    await writeFile(join(bundle, "report.md"), "# Report\nSunny.\n");
    await writeFile(join(bundle, "details", "notes.txt"), "nothing to add\n");
    await exec(bin(), ["manifest", "create", "--id", "packaging.check", bundle], project);
    const config = join(work, "distributor.yml");
    await writeFile(
      config,
      `pipelines:
  - id: packaging
    source: {backend: local, path: ${JSON.stringify(bundle)}}
    destinations:
      - id: site
        backend: local
        path: ${JSON.stringify(join(work, "site"))}
        publish: {source: true, html: true}
        transform: {markdown_to_html: {enabled: true}}
`,
    );

    const { stdout } = await exec(bin(), ["run", "--config", config, "--format", "json"], project);

    const envelope = JSON.parse(stdout) as {
      ok: boolean;
      result: { actions: { action: string; status: string }[] };
    };
    expect(envelope.ok).toBe(true);
    expect(envelope.result.actions.map(({ action, status }) => [action, status])).toEqual([
      ["publish_new", "published"],
    ]);
    expect(await readFile(join(work, "site", "details", "notes.txt"), "utf8")).toBe(
      "nothing to add\n",
    );
    expect(await readFile(join(work, "site", "report.html"), "utf8")).toContain(
      "<title>Report</title>",
    );
    const state = JSON.parse(await readFile(join(work, "site", ".distributor.json"), "utf8"));
    expect(state).toMatchObject({
      schema_version: 2,
      pipeline_id: "packaging",
      source: { manifest: { id: "packaging.check" } },
    });
  });
});

describeLibraryErrors(
  () => project,
  async (script) => (await exec(process.execPath, [script], project)).stdout,
);

/** `./dist/...` paths named by `exports` (every condition) and `bin`. */
function entryTargets(manifest: Manifest): string[] {
  const targets: string[] = [];
  for (const target of Object.values(manifest.exports ?? {})) {
    if (typeof target === "string") targets.push(target);
    else targets.push(...Object.values(target));
  }
  targets.push(...Object.values(manifest.bin ?? {}));
  return targets;
}

/** Specifiers of static imports, re-exports and dynamic imports with a literal argument. */
function importedSpecifiers(code: string): string[] {
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"]*?\sfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const pattern of patterns) {
    for (const match of code.matchAll(pattern)) if (match[1] !== undefined) found.push(match[1]);
  }
  return found;
}

/** package.json of every package below a node_modules directory, nested ones included. */
async function installedManifests(nodeModules: string): Promise<string[]> {
  const found: string[] = [];
  const visit = async (directory: string): Promise<void> => {
    let entries: string[];
    try {
      entries = await readdir(directory);
    } catch {
      return;
    }
    for (const entry of entries) {
      if (entry.startsWith(".")) continue;
      if (entry.startsWith("@")) {
        await visit(join(directory, entry));
        continue;
      }
      const manifest = join(directory, entry, "package.json");
      if (await exists(manifest)) found.push(manifest);
      await visit(join(directory, entry, "node_modules"));
    }
  };
  await visit(nodeModules);
  return found;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** A range as published: `catalog:` replaced by the range of pnpm-workspace.yaml's catalog. */
function fromCatalog(name: string, range: string): string {
  if (range !== "catalog:") return range;
  const workspace = readFileSync(
    fileURLToPath(new URL("../../pnpm-workspace.yaml", import.meta.url)),
    "utf8",
  );
  const catalog = workspace.split(/^catalog:\n/m)[1] ?? "";
  for (const line of catalog.split("\n")) {
    if (!line.startsWith("  ")) break;
    const match = /^\s+"?([^":]+)"?:\s*(\S+)\s*$/.exec(line);
    if (match?.[1] === name && match[2] !== undefined) return match[2];
  }
  throw new Error(`${name}: catalog: without a range in pnpm-workspace.yaml's catalog`);
}
