#!/usr/bin/env node
// Builds the package in the current directory into `dist/`:
//
//   node ../../scripts/build-package.mjs [--cjs src/x.cts] [--esm src/y.ts]
//
// - declarations (and their maps) come from `tsc -p tsconfig.build.json --emitDeclarationOnly`;
// - the JavaScript comes from esbuild: every `./dist/*.js` named by the package's `exports`, plus
//   each `--esm` entry, is bundled from `src/` with code splitting, so a package loads as a
//   handful of files instead of one module per source file (Node 20's ES loader reads each
//   module through the thread pool: a re-run loaded 117 of ours). Every bare import — other
//   workspace packages, third-party packages, `node:` built-ins — stays an import, so each package
//   still resolves its own dependencies and `@distributor/storage` loads once per process
//   (`instanceof StorageError` holds across packages). Entries that share modules share chunks,
//   which sit in `dist/` itself so `new URL("../package.json", import.meta.url)` keeps working;
//   `--cjs` entries are transpiled alone, as CommonJS.
// Names are kept (`keepNames`), so classes and functions report the names they have in `src/`.
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const { values } = parseArgs({
  options: {
    cjs: { type: "string", multiple: true, default: [] },
    esm: { type: "string", multiple: true, default: [] },
  },
});

const manifest = JSON.parse(readFileSync("package.json", "utf8"));

/** `src/` entries of the `./dist/*.js` targets named by `exports`, in every condition. */
function exportedEntries(exports) {
  const targets = [];
  const visit = (value) => {
    if (typeof value === "string") targets.push(value);
    else if (value !== null && typeof value === "object") Object.values(value).forEach(visit);
  };
  visit(exports ?? {});
  return targets
    .filter((target) => target.startsWith("./dist/") && target.endsWith(".js"))
    .map((target) => `src/${target.slice("./dist/".length, -".js".length)}.ts`);
}

const esm = [...new Set([...exportedEntries(manifest.exports), ...values.esm])];
rmSync("dist", { recursive: true, force: true });

const tsc = spawnSync("tsc", ["-p", "tsconfig.build.json", "--emitDeclarationOnly"], {
  stdio: "inherit",
  shell: process.platform === "win32",
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

const common = {
  outbase: "src",
  outdir: "dist",
  platform: "node",
  target: "node20",
  // Maps point into `src/`, as tsc's did; the sources are not copied into them.
  sourcemap: true,
  sourcesContent: false,
  keepNames: true,
  logLevel: "warning",
};
if (esm.length > 0) {
  await build({
    ...common,
    entryPoints: esm,
    bundle: true,
    splitting: true,
    format: "esm",
    packages: "external",
    chunkNames: "chunk-[hash]",
  });
}
if (values.cjs.length > 0) {
  await build({
    ...common,
    entryPoints: values.cjs,
    format: "cjs",
    outExtension: { ".js": ".cjs" },
  });
}
