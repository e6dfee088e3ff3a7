#!/usr/bin/env node
// Measures the destination state at scale: a schema 2 document for a publication of N files
// (each file one output, the manifest embedded), written with the state package's serialiser
// and read back with its parser. Prints per N the size of the text, the time to encode and to
// parse it (median of --runs) with the longest single step of each (what the event loop would
// wait on when a lease holder runs them in slices), the heap growth while parsing, and the size
// the same document had as indented JSON (the format written before), where V8 can still hold
// that as a string.
//
//   pnpm build && node --expose-gc bench/state-scale.mjs [--files 10000,100000,1000000] [--runs 3]
import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const load = (name) => import(pathToFileURL(join(repo, "packages", name, "dist/index.js")).href);
const { buildManifest, parseFrozenManifest, serializeManifest } = await load("bundle");
const { encodeDocumentSteps, parseDocumentSteps } = await load("state");

const { values } = parseArgs({
  options: {
    files: { type: "string", default: "10000,100000,1000000" },
    runs: { type: "string", default: "3" },
  },
});
const runs = Number(values.runs);
const gc = globalThis.gc ?? (() => undefined);

/**
 * Runs a step generator of the state package to its end, as a caller holding a lease does in
 * slices: returns its value, the total time and the longest single step (the longest the event
 * loop would wait on it).
 */
function stepped(steps) {
  let longest = 0;
  const started = performance.now();
  for (;;) {
    const before = performance.now();
    const next = steps.next();
    longest = Math.max(longest, performance.now() - before);
    if (next.done) return { value: next.value, total: performance.now() - started, longest };
  }
}

function median(numbers) {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** A publication of `count` 1 KiB files, 50 directories, as `path_mapping: fixed` records it. */
function documentOf(count) {
  const created = new Date("2026-12-01T10:00:00Z");
  const files = [];
  for (let index = 0; index < count; index++) {
    const path = `d${String(index % 50).padStart(2, "0")}/file-${String(index).padStart(7, "0")}.txt`;
    const sha256 = `sha256:${createHash("sha256").update(path).digest("hex")}`;
    files.push({ path, sha256, size: 1024 });
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  // As a run holds it: read from the bundle's manifest.json (frozen, known valid).
  const manifest = parseFrozenManifest(
    serializeManifest(buildManifest({ id: "bench.scale", created, files })),
  );
  return {
    schemaVersion: 2,
    pipelineId: "bench",
    destinationId: "site",
    publishedAt: created,
    createdAt: created,
    updatedAt: created,
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
    source: { manifest },
    outputs: manifest.files.map((file) => ({
      path: file.path,
      kind: "source",
      sourcePath: file.path,
      sha256: file.sha256,
      size: file.size,
      createdAt: created,
      updatedAt: created,
    })),
  };
}

const mib = (bytes) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
const rows = [];
for (const count of values.files.split(",").map(Number)) {
  const document = documentOf(count);
  const encodeTimes = [];
  const parseTimes = [];
  const encodeSteps = [];
  const parseSteps = [];
  let bytes;
  let heap = 0;
  for (let run = 0; run < runs; run++) {
    gc();
    const encoded = stepped(encodeDocumentSteps(document));
    bytes = encoded.value;
    encodeTimes.push(encoded.total);
    encodeSteps.push(encoded.longest);
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    gc();
    const before = process.memoryUsage().heapUsed;
    const { value: parsed, total, longest } = stepped(parseDocumentSteps(text));
    parseTimes.push(total);
    parseSteps.push(longest);
    heap = Math.max(heap, process.memoryUsage().heapUsed - before);
    if (parsed.outputs.length !== count) throw new Error("parsed a different document");
  }
  let indented = "over V8's string limit";
  try {
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    indented = mib(Buffer.byteLength(JSON.stringify(JSON.parse(text), null, 2)) + 1);
  } catch {
    // An indented document of a million outputs does not fit in one V8 string.
  }
  rows.push({
    files: count,
    size: mib(bytes.byteLength),
    "bytes/file": Math.round(bytes.byteLength / count),
    "indented size": indented,
    "encode ms": Math.round(median(encodeTimes)),
    "longest encode step ms": Math.round(median(encodeSteps)),
    "parse ms": Math.round(median(parseTimes)),
    "longest parse step ms": Math.round(median(parseSteps)),
    "parse heap growth": mib(heap),
  });
  console.error(`done ${count}`);
}
console.table(rows);
