// The release layout against the default one, local → local: a first publication, a replacement
// in which 1 % of the files changed, and `rollback` back and forth. Each measurement alternates
// the two layouts on fresh destinations; medians over `--runs`.
//
//   node bench/releases.mjs [--files 10000] [--runs 5]
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { median } from "./common.mjs";

const { values } = parseArgs({
  options: { files: { type: "string", default: "10000" }, runs: { type: "string", default: "5" } },
});
const files = Number(values.files);
const runs = Number(values.runs);
const bin = fileURLToPath(new URL("../packages/cli/dist/bin.cjs", import.meta.url));
const root = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), "distributor-bench-releases-"));

function cli(...args) {
  const started = performance.now();
  const out = execFileSync(process.execPath, [bin, ...args], { encoding: "utf8" });
  return { ms: performance.now() - started, out };
}

function writeSite(dir, version) {
  rmSync(dir, { recursive: true, force: true });
  for (let i = 0; i < files; i++) {
    const sub = join(dir, "p", String(i % 100));
    mkdirSync(sub, { recursive: true });
    // 1 % of the files change between versions.
    const text = i % 100 === 0 ? `${version} ${i}\n` : `same ${i}\n`;
    writeFileSync(join(sub, `${i}.html`), text.padEnd(1024, "."));
  }
  cli(
    "manifest",
    "create",
    "--id",
    "site",
    "--created",
    `2026-06-0${version === "A" ? 1 : 2}T00:00:00Z`,
    dir,
  );
}

const sources = { A: join(root, "A"), B: join(root, "B") };
writeSite(sources.A, "A");
writeSite(sources.B, "B");

function config(source, dest, layout) {
  const path = join(root, `${layout}.yml`);
  writeFileSync(
    path,
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: www, backend: local, path: ${dest}, path_mapping: {mode: fixed}, fsync: false${layout === "releases" ? ", layout: releases" : ""}}\n`,
  );
  return path;
}

const times = {
  in_place: { first: [], replace: [] },
  releases: { first: [], replace: [], rollback: [], switch: [] },
};
for (let run = 0; run < runs; run++) {
  for (const layout of ["in_place", "releases"]) {
    const dest = join(root, `dest-${layout}`);
    rmSync(dest, { recursive: true, force: true });
    execFileSync("sync");
    times[layout].first.push(cli("run", "--config", config(sources.A, dest, layout)).ms);
    execFileSync("sync");
    times[layout].replace.push(cli("run", "--config", config(sources.B, dest, layout)).ms);
    if (layout !== "releases") continue;
    const configPath = config(sources.B, dest, layout);
    const previous = readlinkSync(join(dest, "current")).slice("releases/".length);
    for (const to of ["--previous", "--to"]) {
      const args = [
        "rollback",
        "--config",
        configPath,
        "--pipeline",
        "site",
        "--destination",
        "www",
        "--format",
        "json",
      ];
      const back =
        to === "--previous" ? cli(...args, "--previous") : cli(...args, "--to", previous);
      times.releases.rollback.push(back.ms);
      times.releases.switch.push(JSON.parse(back.out).result.switch_ms);
    }
  }
}
rmSync(root, { recursive: true, force: true });

const s = (ms) => `${(median(ms) / 1000).toFixed(2)} s`;
console.log(`${files} files of 1 KiB, local → local, fsync: false, medians of ${runs} runs`);
console.log("| | in place | releases |");
console.log("| --- | --- | --- |");
console.log(`| first publication | ${s(times.in_place.first)} | ${s(times.releases.first)} |`);
console.log(
  `| replacement, 1 % changed | ${s(times.in_place.replace)} | ${s(times.releases.replace)} |`,
);
console.log(`| rollback (whole process) | — | ${s(times.releases.rollback)} |`);
console.log(
  `| rollback (switch_ms: state and link under the lease) | — | ${median(times.releases.switch)} ms |`,
);
