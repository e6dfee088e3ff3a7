#!/usr/bin/env node
// Benchmark: what the commit protocol's lease and journal cost a local → local publication.
//
//   pnpm build && node bench/lease-overhead.mjs [--files 1000] [--size 4096] [--runs 7]
//
// Publishes the same generated bundle into a fresh destination, alternating two variants in one
// process: the real protocol, and the same run with the lease file's reads and writes answered
// from memory (no lease IO at all). Reports the median of each and the ratio.
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const { parseConfig, run, runSucceeded } = await import(
  pathToFileURL(join(repo, "packages/publish/dist/index.js")).href
);
const { createLocalBackend, createMemoryBackend } = await import(
  pathToFileURL(join(repo, "packages/storage/dist/index.js")).href
);
const { values } = parseArgs({
  options: {
    files: { type: "string", default: "1000" },
    size: { type: "string", default: "4096" },
    runs: { type: "string", default: "7" },
  },
});
const files = Number(values.files);
const size = Number(values.size);
const runs = Number(values.runs);

const work = await mkdtemp(join(tmpdir(), "distributor-lease-bench-"));
const source = join(work, "src");
const listed = [];
for (let i = 0; i < files; i++) {
  const path = `d${i % 20}/f${String(i).padStart(5, "0")}.bin`;
  const bytes = randomBytes(size);
  await mkdir(dirname(join(source, path)), { recursive: true });
  await writeFile(join(source, path), bytes);
  listed.push({ path, sha256: `sha256:${createHash("sha256").update(bytes).digest("hex")}`, size });
}
listed.sort((a, b) => (a.path < b.path ? -1 : 1));
const digest = createHash("sha256")
  .update(listed.map((f) => `${f.sha256} ${f.size} ${f.path}\n`).join(""))
  .digest("hex");
await writeFile(
  join(source, "manifest.json"),
  JSON.stringify({
    schema_version: 1,
    id: "bench.lease",
    created: "2026-06-04T12:00:00Z",
    digest: `sha256:${digest}`,
    files: listed,
  }),
);

/** Local storage whose lease file lives in memory: the protocol minus its lease IO. */
function withoutLeaseIo(root) {
  const local = createLocalBackend({ root });
  const memory = createMemoryBackend();
  const isLease = (path) => String(path).endsWith(".distributor.lease.json");
  return new Proxy(local, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return (...args) => {
        if (
          ["readFile", "readVersioned", "writeFile", "stat"].includes(property) &&
          isLease(args[0])
        ) {
          return memory[property](...args);
        }
        if (property === "deletePaths" && args[1]?.some(isLease)) {
          return memory.deletePaths(...args);
        }
        return value.apply(target, args);
      };
    },
  });
}

async function once(variant, index) {
  const dest = join(work, `dest-${variant}-${index}`);
  const config = parseConfig(
    `pipelines:\n  - id: bench\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: d, backend: local, path: ${dest}}\n`,
  );
  const backends =
    variant === "lease"
      ? undefined
      : {
          local: async (l) =>
            l.path === dest ? withoutLeaseIo(l.path) : createLocalBackend({ root: l.path }),
        };
  const start = process.hrtime.bigint();
  const report = await run({ config, ...(backends ? { backends } : {}) });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (!runSucceeded(report)) throw new Error(JSON.stringify(report.actions));
  await rm(dest, { recursive: true, force: true });
  return seconds;
}

const timings = { lease: [], none: [] };
await once("lease", -1); // warm-up: page cache, JIT
for (let i = 0; i < runs; i++) {
  for (const variant of i % 2 === 0 ? ["lease", "none"] : ["none", "lease"]) {
    timings[variant].push(await once(variant, i));
  }
}
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const withLease = median(timings.lease);
const without = median(timings.none);
console.log(`publish ${files} × ${size} B local → local, ${runs} runs each, alternating`);
console.log(`  with lease and journal: ${withLease.toFixed(3)} s (median)`);
console.log(`  lease IO answered from memory: ${without.toFixed(3)} s (median)`);
console.log(
  `  ratio: ${(withLease / without).toFixed(3)} (${((withLease / without - 1) * 100).toFixed(1)} %)`,
);
await rm(work, { recursive: true, force: true });
