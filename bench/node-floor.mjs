#!/usr/bin/env node
// The floor under distributor's local publishing: what Node itself costs for the work the bundle
// rules and the commit protocol require, with none of distributor's code. `compare-local.mjs` runs it
// beside distributor and the peers, so a ratio to rclone can be read against the best a Node
// program making the same system calls reaches on the same disk in the same run.
//
//   node bench/node-floor.mjs copy BUNDLE DEST [--fsync]
//   node bench/node-floor.mjs rerun CONFIG
//
// copy: walks BUNDLE (readdir + one lstat per entry), reads its manifest and hashes every listed
//   file (validation before the first write), then copies each file as distributor does: open
//   the source, create a temp file beside the target with O_EXCL, read, hash and write 256 KiB at
//   a time with synchronous calls, check the digest, hard-link the temp file to the target (no
//   clobbering) and unlink it. With --fsync each file is flushed before it is linked, 16 flushes
//   in flight on the thread pool, and every directory that received files is flushed at the end.
//   Last, a state file listing every output is written to a temp file, flushed and renamed. No
//   symlink checks of ancestors, no lease, no journal, no progress, no plan: distributor does
//   more than this, never less.
// rerun: loads yargs and yaml (distributor's own dependencies, from the CLI's and the publish
//   package's directories), parses its command line and the YAML config, walks the source
//   bundle, parses its manifest and the destination's state file and compares the files: what a
//   re-run in which nothing changed cannot avoid in Node.
import { createHash } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  fsync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const [mode, ...rest] = process.argv.slice(2);

/** Every regular file below `root` (logical paths), one lstat per entry as a safe walk needs. */
function walk(root) {
  const files = [];
  const pending = [""];
  while (pending.length > 0) {
    const directory = pending.pop();
    for (const entry of readdirSync(join(root, directory), { withFileTypes: true })) {
      const path = directory === "" ? entry.name : `${directory}/${entry.name}`;
      const stats = lstatSync(join(root, path));
      if (stats.isDirectory()) pending.push(path);
      else if (stats.isFile()) files.push(path);
    }
  }
  return files.sort();
}

const buffer = Buffer.allocUnsafe(256 * 1024);
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

function digestOf(path) {
  const fd = openSync(path, READ_FLAGS);
  try {
    fstatSync(fd);
    const hash = createHash("sha256");
    for (let read = readSync(fd, buffer); read > 0; read = readSync(fd, buffer)) {
      hash.update(buffer.subarray(0, read));
    }
    return `sha256:${hash.digest("hex")}`;
  } finally {
    closeSync(fd);
  }
}

const flush = (fd) =>
  new Promise((resolve, reject) => fsync(fd, (error) => (error ? reject(error) : resolve())));

async function copy(bundle, dest, durable) {
  walk(bundle);
  const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
  for (const file of manifest.files) {
    if (digestOf(join(bundle, file.path)) !== file.sha256) throw new Error(`${file.path} differs`);
  }
  const made = new Set();
  let serial = 0;
  const copyOne = async (file) => {
    const directory = dirname(join(dest, file.path));
    if (!made.has(directory)) {
      mkdirSync(directory, { recursive: true });
      made.add(directory);
    }
    const source = openSync(join(bundle, file.path), READ_FLAGS);
    const temp = join(directory, `.floor.${process.pid}.${serial++}.tmp`);
    const out = openSync(temp, "wx", 0o666);
    try {
      fstatSync(source);
      const hash = createHash("sha256");
      for (let read = readSync(source, buffer); read > 0; read = readSync(source, buffer)) {
        hash.update(buffer.subarray(0, read));
        for (let done = 0; done < read; ) done += writeSync(out, buffer, done, read - done);
      }
      if (`sha256:${hash.digest("hex")}` !== file.sha256) throw new Error(`${file.path} changed`);
      if (durable) await flush(out);
      fstatSync(out);
    } finally {
      closeSync(out);
      closeSync(source);
    }
    linkSync(temp, join(dest, file.path));
    unlinkSync(temp);
  };
  const queue = [...manifest.files];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let file = queue.shift(); file !== undefined; file = queue.shift()) await copyOne(file);
    }),
  );
  const flushDirectory = async (directory) => {
    const fd = openSync(directory, constants.O_RDONLY);
    try {
      await flush(fd);
    } finally {
      closeSync(fd);
    }
  };
  if (durable) await Promise.all([...made].map(flushDirectory));
  const state = join(dest, ".floor-state.json");
  const outputs = manifest.files.map(({ path, sha256, size }) => ({ path, sha256, size }));
  writeFileSync(`${state}.tmp`, JSON.stringify({ manifest, outputs }, null, 2), { flush: true });
  renameSync(`${state}.tmp`, state);
  await flushDirectory(dest);
}

async function rerun(configPath) {
  const cli = createRequire(join(repo, "packages/cli/package.json"));
  const publish = createRequire(join(repo, "packages/publish/package.json"));
  const { default: yargs } = await import(cli.resolve("yargs"));
  const YAML = publish("yaml");
  const argv = yargs(["run", "--config", configPath])
    .command("run", "publish", (y) => y.option("config", { type: "string", demandOption: true }))
    .strict()
    .parseSync();
  const config = YAML.parse(readFileSync(argv.config, "utf8"));
  const pipeline = config.pipelines[0];
  const bundle = join(pipeline.source.path, "bundle");
  const files = walk(bundle).filter((path) => path !== "manifest.json");
  const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
  const statePath = join(pipeline.destinations[0].path, "bundle", ".distributor.json");
  const state = JSON.parse(readFileSync(statePath, "utf8"));
  const listed = new Set(manifest.files.map((file) => file.path));
  if (files.length !== listed.size || files.some((path) => !listed.has(path))) {
    throw new Error("the source changed");
  }
  const same = JSON.stringify(state.source.manifest) === JSON.stringify(manifest);
  console.log(`floor re-run: ${files.length} files, ${state.outputs.length} outputs, same=${same}`);
}

if (mode === "copy") await copy(rest[0], rest[1], rest.includes("--fsync"));
else if (mode === "rerun") await rerun(rest[0]);
else {
  console.error("usage: node-floor.mjs copy BUNDLE DEST [--fsync] | rerun CONFIG");
  process.exit(2);
}
