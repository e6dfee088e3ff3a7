// The source of the reader process `startReader` spawns (`node --input-type=module -e <source>
// <root> <expected>`, so its arguments start at argv[1]), kept as text: the kit needs no file
// beside its module, from `src/` or built.
export const READER_SOURCE = `// A reader of a release-layout destination, as a web server is one: it polls \`<root>/current\`
// until told to stop (a line on stdin; it then polls once more), and checks every read against the publications it was
// given (a JSON file: { "A": {path: text}, "B": {path: text} }):
// - per poll, the release \`current\` resolves to holds exactly the files of one publication;
// - every file read through \`current/<path>\` holds that path's bytes in one of them.
// It prints one JSON line when it stops: polls, reads, which publications it saw, violations.
import { readdir, readFile, realpath } from "node:fs/promises";
import { join, relative } from "node:path";

const [root, expectedFile] = process.argv.slice(1);
const publications = JSON.parse(await readFile(expectedFile, "utf8"));
const names = Object.keys(publications);
const current = join(root, "current");
const seen = new Set();
const violations = [];
let polls = 0;
let reads = 0;
let stopping = false;
process.stdin.on("data", () => {
  stopping = true;
});

async function filesBelow(dir) {
  const files = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = await readFile(path, "utf8");
  }
  return files;
}

const same = (left, right) => {
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => left[key] === right[key]);
};

// On the stop line, one more whole poll is made, begun after it: the one that sees what the
// publication left, however long a poll takes on a busy machine.
for (;;) {
  const last = stopping;
  polls++;
  let release;
  try {
    release = await realpath(current);
  } catch {
    if (last) break;
    continue; // no release yet
  }
  const files = await filesBelow(release);
  const match = names.find((name) => same(files, publications[name]));
  if (match === undefined) violations.push(\`release \${release} holds \${Object.keys(files).length} files of no publication\`);
  else seen.add(match);
  // Through the link, path by path, as separate requests would.
  for (const path of Object.keys(publications[names[0]]).slice(0, 20)) {
    let text;
    try {
      text = await readFile(join(current, path), "utf8");
    } catch (error) {
      if (error.code === "ENOENT" && names.some((name) => publications[name][path] === undefined)) continue;
      violations.push(\`\${path}: \${error.code}\`);
      continue;
    }
    reads++;
    if (!names.some((name) => publications[name][path] === text)) violations.push(\`\${path}: bytes of no publication\`);
  }
  if (last || violations.length > 20) break;
}
process.stdout.write(\`\${JSON.stringify({ polls, reads, seen: [...seen].sort(), violations })}\\n\`);
`;
