// The layout every package keeps, checked by test/repository/source-layout.test.ts and by
// `node scripts/source-layout.mjs` (exit status 1 on a problem; `--write-api` rewrites the
// committed lists of exported names). docs/design/layout.md says why each rule exists.
//
// Rules, each with its name as problems report it:
// - `folder-layer`: a package's folders are layers (FOLDER_LAYERS); a module imports only from its
//   own layer or those below it, never from an entry point (`index.ts`, or a subpath's folder).
// - `import-cycle`: no cycle among a package's modules, type-only imports included.
// - `long-file`: no source file over MAX_SOURCE_LINES lines (`testing/` kits aside).
// - `export-star`: entry points list what they export.
// - `undeclared-dependency` / `unused-dependency`: a workspace package imported from `src/` is a
//   dependency (or peer), one imported only by tests a dev dependency; nothing declared goes
//   unimported.
// - `test-imports-test`: a test never imports another package's `test/` by path.
// - `public-api`: `public-api.txt` lists the names every entry point exports, as they are.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ts = createRequire(import.meta.url)("typescript");

export const MAX_SOURCE_LINES = 500;
export const PUBLIC_API_FILE = "public-api.txt";
const SCOPE = "@distributor/";

/** Each package's folders below `src/`, lowest layer first; folders left out are not layered. */
export const FOLDER_LAYERS = {
  engine: ["content", "protocol", "plan", "execute", "release"],
};

const repositoryRoot = fileURLToPath(new URL("../", import.meta.url));

/** The package folders below `<root>/packages/`. */
export function packageNames(root = repositoryRoot) {
  const dir = join(root, "packages");
  return readdirSync(dir)
    .filter((name) => statSync(join(dir, name, "package.json"), { throwIfNoEntry: false }))
    .sort();
}

const SOURCE = /\.(c|m)?ts$/;
const SCRIPT = /\.(c|m)?[jt]s$/;
const isTest = (path) => /\.test\.(c|m)?ts$/.test(path);

function walk(dir, accept) {
  const files = [];
  const visit = (current) => {
    for (const name of readdirSync(current).sort()) {
      if (name === "node_modules" || name === "dist") continue;
      const path = join(current, name);
      const stats = statSync(path, { throwIfNoEntry: false });
      if (stats?.isDirectory()) visit(path);
      else if (stats?.isFile() && accept(name)) files.push(path);
    }
  };
  if (statSync(dir, { throwIfNoEntry: false })?.isDirectory()) visit(dir);
  return files;
}

/** Source modules of `src/` (tests and declarations left out). */
const sourceFiles = (pkgDir) =>
  walk(join(pkgDir, "src"), (name) => SOURCE.test(name) && !name.endsWith(".d.ts")).filter(
    (file) => !isTest(file),
  );

/** Test code: `test/`, tests beside the sources, and the package's vitest configuration. */
const testFiles = (pkgDir) => [
  ...walk(join(pkgDir, "test"), (name) => SCRIPT.test(name) && !name.endsWith(".d.ts")),
  ...walk(join(pkgDir, "src"), (name) => isTest(name)),
  ...walk(pkgDir, (name) => /^vitest\.config\.(c|m)?ts$/.test(name)).filter(
    (file) => dirname(file) === pkgDir,
  ),
];

/** Every module specifier `file` imports (static, re-exports, dynamic, require; types included). */
function specifiers(file) {
  const text = readFileSync(file, "utf8");
  return ts.preProcessFile(text, true, true).importedFiles.map((entry) => entry.fileName);
}

/** The module a relative specifier of `from` names, as a path to its source. */
function resolveRelative(from, spec) {
  const target = resolve(dirname(from), spec);
  return target
    .replace(/\.js$/, ".ts")
    .replace(/\.cjs$/, ".cts")
    .replace(/\.mjs$/, ".mts");
}

/** The workspace package a bare specifier names, without the scope, or undefined. */
function workspacePackage(spec) {
  if (!spec.startsWith(SCOPE)) return undefined;
  return spec.slice(SCOPE.length).split("/")[0];
}

/** `src/`'s module graph: each file and the files of `src/` it imports. */
function moduleGraph(pkgDir) {
  const files = sourceFiles(pkgDir);
  const known = new Set(files);
  const graph = new Map();
  for (const file of files) {
    const targets = specifiers(file)
      .filter((spec) => spec.startsWith("."))
      .map((spec) => resolveRelative(file, spec))
      .filter((target) => known.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** The import cycles among a package's modules, type-only imports included, as path lists. */
export function importCycles(name, root = repositoryRoot) {
  const pkgDir = join(root, "packages", name);
  const src = join(pkgDir, "src");
  const graph = moduleGraph(pkgDir);
  const cycles = [];
  const state = new Map();
  const stack = [];
  const visit = (file) => {
    state.set(file, "open");
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === "open") {
        cycles.push([...stack.slice(stack.indexOf(target)), target].map((p) => relative(src, p)));
      } else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return cycles;
}

/** The entry points of a package: `exports` targets mapped back to their sources. */
export function entryPoints(name, root = repositoryRoot) {
  const pkgDir = join(root, "packages", name);
  const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  const entries = new Map();
  for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
    const file = typeof target === "string" ? target : (target.default ?? target.import);
    if (typeof file !== "string" || !file.startsWith("./dist/") || !file.endsWith(".js")) continue;
    const source = join(pkgDir, "src", file.slice("./dist/".length).replace(/\.js$/, ".ts"));
    entries.set(subpath, source);
  }
  return entries;
}

/** Imports that go up or across a package's layers, as `from -> to` lines. */
export function layerViolations(name, root = repositoryRoot, layers = FOLDER_LAYERS[name]) {
  if (layers === undefined) return [];
  const pkgDir = join(root, "packages", name);
  const src = join(pkgDir, "src");
  const entries = new Set(entryPoints(name, root).values());
  const entryFolders = new Set(
    [...entries]
      .map((file) => relative(src, dirname(file)).split(sep)[0])
      .filter((folder) => folder !== "" && !layers.includes(folder)),
  );
  const layerOf = (file) => {
    const folder = relative(src, file).split(sep);
    return folder.length > 1 ? layers.indexOf(folder[0]) : -1;
  };
  const violations = [];
  for (const [file, targets] of moduleGraph(pkgDir)) {
    const from = layerOf(file);
    if (from < 0) continue;
    for (const target of targets) {
      const folder = relative(src, target).split(sep);
      const to = layerOf(target);
      const intoEntry =
        entries.has(target) || (folder.length > 1 && entryFolders.has(folder[0] ?? ""));
      if (intoEntry || to > from) {
        violations.push(`${relative(src, file)} -> ${relative(src, target)}`);
      }
    }
  }
  return violations;
}

/** Source files of a package over MAX_SOURCE_LINES lines (`testing/` aside). */
export function longFiles(name, root = repositoryRoot) {
  const src = join(root, "packages", name, "src");
  return sourceFiles(join(root, "packages", name))
    .filter((file) => !relative(src, file).split(sep).includes("testing"))
    .map((file) => ({
      file: relative(src, file),
      lines: readFileSync(file, "utf8").split("\n").length - 1,
    }))
    .filter(({ lines }) => lines > MAX_SOURCE_LINES);
}

/** Entry points (`index.ts` files and `exports` targets) that re-export with `export *`. */
export function starExports(name, root = repositoryRoot) {
  const pkgDir = join(root, "packages", name);
  const src = join(pkgDir, "src");
  const entries = new Set([
    ...sourceFiles(pkgDir).filter((file) => file.endsWith(`${sep}index.ts`)),
    ...[...entryPoints(name, root).values()].filter((file) =>
      statSync(file, { throwIfNoEntry: false }),
    ),
  ]);
  return [...entries]
    .filter((file) => /^\s*export\s+\*/m.test(readFileSync(file, "utf8")))
    .map((file) => relative(src, file))
    .sort();
}

/** Workspace dependencies imported but not declared, or declared but not imported. */
export function dependencyProblems(name, root = repositoryRoot) {
  const pkgDir = join(root, "packages", name);
  const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  const own = (list) =>
    new Set(
      Object.keys(list ?? {})
        .filter((dep) => dep.startsWith(SCOPE))
        .map(workspacePackage),
    );
  const runtime = own({ ...manifest.dependencies, ...manifest.peerDependencies });
  const dev = own(manifest.devDependencies);
  const used = (files) =>
    new Set(
      files
        .flatMap((file) => specifiers(file).map(workspacePackage))
        .filter((dep) => dep && dep !== name),
    );
  const bySource = used(sourceFiles(pkgDir));
  // A dependency that installs an optional peer of another dependency is used by that one (the
  // CLI brings the storage adapters `@distributor/publish` imports when a configuration names them).
  for (const dep of runtime) {
    const path = join(root, "packages", dep, "package.json");
    if (!statSync(path, { throwIfNoEntry: false })) continue;
    const peers = JSON.parse(readFileSync(path, "utf8")).peerDependencies ?? {};
    for (const peer of Object.keys(peers).map(workspacePackage)) {
      if (peer && runtime.has(peer)) bySource.add(peer);
    }
  }
  const byTests = used(testFiles(pkgDir));
  const problems = [];
  for (const dep of [...bySource].sort()) {
    if (!runtime.has(dep))
      problems.push({
        rule: "undeclared-dependency",
        detail: `src imports ${SCOPE}${dep}, not in dependencies`,
      });
  }
  for (const dep of [...byTests].sort()) {
    if (!runtime.has(dep) && !dev.has(dep))
      problems.push({
        rule: "undeclared-dependency",
        detail: `tests import ${SCOPE}${dep}, not declared`,
      });
  }
  for (const dep of [...runtime].sort()) {
    if (!bySource.has(dep))
      problems.push({
        rule: "unused-dependency",
        detail: `${SCOPE}${dep} is a dependency that src never imports`,
      });
  }
  for (const dep of [...dev].sort()) {
    if (!byTests.has(dep) && !bySource.has(dep))
      problems.push({
        rule: "unused-dependency",
        detail: `${SCOPE}${dep} is a dev dependency that no test imports`,
      });
  }
  return problems;
}

/** Test files that import another package's `test/` folder by path, as `file -> target`. */
export function crossTestImports(name, root = repositoryRoot) {
  const packagesDir = join(root, "packages");
  const pkgDir = join(packagesDir, name);
  const found = [];
  for (const file of testFiles(pkgDir)) {
    for (const spec of specifiers(file).filter((s) => s.startsWith("."))) {
      const [owner, folder] = relative(packagesDir, resolve(dirname(file), spec)).split(sep);
      const isPackage = owner !== undefined && owner !== ".." && owner !== name;
      if (isPackage && folder === "test") found.push(`${relative(pkgDir, file)} -> ${spec}`);
    }
  }
  return found;
}

/** The names an entry point exports (`type ` before a type-only one), sorted. */
export function exportedNames(file) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest);
  const names = [];
  const exported = (node) =>
    ts.canHaveModifiers(node) &&
    (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const node of source.statements) {
    if (ts.isExportDeclaration(node)) {
      const clause = node.exportClause;
      if (clause === undefined) names.push(`* from ${node.moduleSpecifier.text}`);
      else if (ts.isNamespaceExport(clause)) names.push(clause.name.text);
      else
        for (const element of clause.elements)
          names.push(`${node.isTypeOnly || element.isTypeOnly ? "type " : ""}${element.name.text}`);
    } else if (ts.isExportAssignment(node)) names.push("default");
    else if (exported(node)) {
      const isType = ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node);
      if (ts.isVariableStatement(node))
        for (const declaration of node.declarationList.declarations)
          names.push(declaration.name.getText(source));
      else if (node.name) names.push(`${isType ? "type " : ""}${node.name.text}`);
    }
  }
  const key = (entry) => entry.replace(/^type /, "");
  return names.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** The text of a package's `public-api.txt` as its entry points are now. */
export function publicApiText(name, root = repositoryRoot) {
  const lines = [
    `# The names ${SCOPE}${name} exports, per entry point. A change to this list is a change to the`,
    "# package's public surface; `node scripts/source-layout.mjs --write-api` rewrites it.",
  ];
  for (const [subpath, file] of [...entryPoints(name, root)].sort(([a], [b]) => (a < b ? -1 : 1))) {
    lines.push("", subpath);
    for (const entry of exportedNames(file)) lines.push(`  ${entry}`);
  }
  return `${lines.join("\n")}\n`;
}

/** Whether a package's committed `public-api.txt` differs from its entry points (true if absent). */
export function publicApiOutOfDate(name, root = repositoryRoot) {
  const path = join(root, "packages", name, PUBLIC_API_FILE);
  const committed = statSync(path, { throwIfNoEntry: false }) ? readFileSync(path, "utf8") : "";
  return committed !== publicApiText(name, root);
}

/** Every problem of every package, as `{ package, rule, detail }`. */
export function layoutProblems(root = repositoryRoot, layers = FOLDER_LAYERS) {
  const problems = [];
  for (const name of packageNames(root)) {
    const add = (rule, detail) => problems.push({ package: name, rule, detail });
    for (const v of layerViolations(name, root, layers[name])) add("folder-layer", v);
    for (const cycle of importCycles(name, root)) add("import-cycle", cycle.join(" -> "));
    for (const { file, lines } of longFiles(name, root))
      add("long-file", `${file} has ${lines} lines (at most ${MAX_SOURCE_LINES})`);
    for (const file of starExports(name, root)) add("export-star", `${file} uses export *`);
    for (const { rule, detail } of dependencyProblems(name, root)) add(rule, detail);
    for (const found of crossTestImports(name, root)) add("test-imports-test", found);
    if (entryPoints(name, root).size > 0 && publicApiOutOfDate(name, root))
      add(
        "public-api",
        `${PUBLIC_API_FILE} differs from the entry points; run node scripts/source-layout.mjs --write-api`,
      );
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--write-api")) {
    for (const name of packageNames().filter((name) => entryPoints(name).size > 0)) {
      writeFileSync(join(repositoryRoot, "packages", name, PUBLIC_API_FILE), publicApiText(name));
    }
  }
  const problems = layoutProblems();
  for (const problem of problems)
    console.log(`${problem.package}: ${problem.rule}: ${problem.detail}`);
  console.log(
    problems.length === 0 ? "source layout: ok" : `source layout: ${problems.length} problem(s)`,
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
}
