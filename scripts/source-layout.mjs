// Checks of the source layout every package keeps (run by packages/cli/test/layout.test.ts, or
// `node scripts/source-layout.mjs` for a report): no runtime import cycle among a package's
// modules, no source file over MAX_SOURCE_LINES lines, and no `export *` in an entry point.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const MAX_SOURCE_LINES = 500;

const packagesDir = fileURLToPath(new URL("../packages/", import.meta.url));

/** The package folders below packages/. */
export function packageNames() {
  return readdirSync(packagesDir)
    .filter((name) => statSync(join(packagesDir, name, "package.json"), { throwIfNoEntry: false }))
    .sort();
}

/** Every `.ts`/`.cts` source file below `dir`, tests left out. */
function sourceFiles(dir) {
  const files = [];
  const walk = (current) => {
    for (const name of readdirSync(current).sort()) {
      const path = join(current, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.c?ts$/.test(name) && !name.endsWith(".test.ts") && !name.endsWith(".d.ts")) {
        files.push(path);
      }
    }
  };
  walk(dir);
  return files;
}

// `import … from "./x.js"` and `export … from "./x.js"`, but not `import type` / `export type`:
// those vanish at run time and cannot make a cycle.
const RUNTIME_IMPORT =
  /^\s*(?:import|export)\s+(?!type\s)[^;]*?\s*from\s*["'](\.[^"']+)["']|^\s*import\s+["'](\.[^"']+)["']/gms;

/** The runtime import cycles among the modules of `packages/<name>/src`, as lists of paths. */
export function importCycles(name) {
  const root = join(packagesDir, name, "src");
  const graph = new Map();
  for (const file of sourceFiles(root)) {
    const targets = [];
    for (const match of readFileSync(file, "utf8").matchAll(RUNTIME_IMPORT)) {
      const spec = match[1] ?? match[2];
      targets.push(resolve(dirname(file), spec.replace(/\.js$/, ".ts").replace(/\.cjs$/, ".cts")));
    }
    graph.set(file, targets);
  }
  const cycles = [];
  const state = new Map();
  const stack = [];
  const visit = (file) => {
    state.set(file, "open");
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (state.get(target) === "open") {
        cycles.push([...stack.slice(stack.indexOf(target)), target].map((p) => relative(root, p)));
      } else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return cycles;
}

/** Source files of `packages/<name>/src` over MAX_SOURCE_LINES lines (`testing/` aside). */
export function longFiles(name) {
  const root = join(packagesDir, name, "src");
  return sourceFiles(root)
    .filter((file) => !relative(root, file).split("/").includes("testing"))
    .map((file) => ({
      file: relative(root, file),
      lines: readFileSync(file, "utf8").split("\n").length - 1,
    }))
    .filter(({ lines }) => lines > MAX_SOURCE_LINES);
}

/** Entry points (`index.ts` files) of `packages/<name>/src` that re-export with `export *`. */
export function starExports(name) {
  const root = join(packagesDir, name, "src");
  return sourceFiles(root)
    .filter((file) => file.endsWith("/index.ts"))
    .filter((file) => /^\s*export\s+\*/m.test(readFileSync(file, "utf8")))
    .map((file) => relative(root, file));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let problems = 0;
  for (const name of packageNames()) {
    for (const cycle of importCycles(name)) {
      problems += 1;
      console.log(`${name}: import cycle ${cycle.join(" -> ")}`);
    }
    for (const { file, lines } of longFiles(name)) {
      problems += 1;
      console.log(`${name}: ${file} has ${lines} lines (at most ${MAX_SOURCE_LINES})`);
    }
    for (const file of starExports(name)) {
      problems += 1;
      console.log(`${name}: ${file} uses export *`);
    }
  }
  console.log(problems === 0 ? "source layout: ok" : `source layout: ${problems} problem(s)`);
  process.exitCode = problems === 0 ? 0 : 1;
}
