import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import { readdir, readFile, readlink, utimes } from "node:fs/promises";
import { join, relative } from "node:path";
import {
  expectAgreement,
  expectWholePublication,
  writeSourceBundle,
} from "@distributor/engine/testing";
import { parseDocument } from "@distributor/state";
import {
  createLocalBackend,
  isTempFileFor,
  isTempFileName,
  LEASE_FILE_NAME,
} from "@distributor/storage";
import {
  copyImage,
  createFlushWatchedLocalBackend,
  imageDirectory,
  loopMountUnavailable,
  makeExt4Image,
  mountImage,
  unmountAll,
  unmountImage,
} from "@distributor/storage/testing";
import { afterAll, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { type Config, parseConfig } from "../../src/config/index.js";
import { prune } from "../../src/maintenance/prune/prune.js";
import { run, runSucceeded } from "../../src/run/run.js";

// Power cuts on the real kernel (docs/design/power-loss.md, "The real kernel"): each scenario runs
// on a fresh ext4 image (default mode: data=ordered, delayed allocation) loop-mounted here, with
// the durable default (`fsync`). Right after every flush of the destination's backend completes,
// and after each command returns, the image's backing file is copied: what the device held at
// that instant, which is what a power cut then leaves. Each copy is then mounted (ext4 replays
// its journal) and must show: every state parses and holds the bytes of every output it records;
// what a command reported published before the copy is still recorded; under the release layout
// `current` links to one whole publication. Then the interrupted command runs again on it and
// must end as a clean run does.

const CI = process.env.CI === "true";
const unavailable = loopMountUnavailable();
const IMAGE_MIB = 32;
const HOUR = 3_600_000;

type Files = Record<string, string>;

/** `count` files of a few KiB each (several blocks of the small image's 1 KiB blocks). */
function filesOf(prefix: string, count: number, text: string): Files {
  const files: Files = {};
  for (let i = 1; i <= count; i++) {
    const name = `${prefix}${String(i).padStart(2, "0")}`;
    files[name] = `${name} ${text}\n`.repeat(60);
  }
  return files;
}

const V1: Files = {
  "index.html": "<p>one</p>\n",
  ...filesOf("pages/p", 10, "one"),
  ...filesOf("assets/s", 6, "same"),
  ...filesOf("docs/guide/g", 7, "one"),
};
const V2: Files = {
  "index.html": "<p>two</p>\n",
  ...filesOf("pages/p", 10, "two"),
  ...filesOf("assets/s", 6, "same"),
  ...filesOf("docs/guide/g", 4, "one"),
  ...filesOf("news/n", 4, "two"),
};
const V3: Files = {
  "index.html": "<p>three</p>\n",
  ...filesOf("pages/p", 8, "three"),
  ...filesOf("assets/s", 6, "same"),
  ...filesOf("extra/e", 3, "three"),
};
const VERSIONS = { v1: V1, v2: V2, v3: V3 } as const;
type Version = keyof typeof VERSIONS;

interface Case {
  dir: string;
  dest: string;
  clock: { offset: number };
  now: () => Date;
  configs: Record<Version, Config>;
}

interface Step {
  name: string;
  act(c: Case, backends: BackendRegistry | undefined): Promise<boolean>;
  /** Under the release layout: the publication `current` holds once the step is done. */
  live?: Version;
  /**
   * While it runs a state may record part of its source: a prune commits a bundle path's state
   * without the pruned records before deleting their files, then removes the state.
   */
  partial?: boolean;
}

interface Scenario {
  name: string;
  /** What the destination's configuration adds to `backend: local` and its path. */
  policy: string;
  /** Sources hold three bundles at `days/1..3`, each published at its own bundle path. */
  nested?: boolean;
  releases?: boolean;
  steps: Step[];
}

const publish = (version: Version, live?: Version): Step => ({
  name: `a run of ${version}`,
  act: async (c, backends) =>
    runSucceeded(
      await run({ config: c.configs[version], backends, now: c.now, lease: { renew: false } }),
    ),
  ...(live === undefined ? {} : { live }),
});

const SCENARIOS: Scenario[] = [
  {
    name: "a first publication in place, then its replacement",
    policy: "",
    steps: [publish("v1"), publish("v2")],
  },
  {
    name: "three publications in the release layout, the oldest release pruned",
    policy:
      "\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: 2}",
    releases: true,
    steps: [publish("v1", "v1"), publish("v2", "v2"), publish("v3", "v3")],
  },
  {
    name: "three bundle paths published, then a prune of two of them",
    policy: "\n        retention: {prune: {enabled: true, keep_latest: 1}}",
    nested: true,
    steps: [
      publish("v1"),
      {
        name: "a prune",
        partial: true,
        act: async (c, backends) => {
          c.clock.offset += 2 * HOUR;
          await prune({
            config: c.configs.v1,
            pipelineId: "site",
            destinationId: "www",
            dryRun: false,
            backends,
            now: c.now,
            lease: { renew: false },
          });
          return true;
        },
      },
    ],
  },
];

const sha = (bytes: Uint8Array | string) =>
  `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** Every file below `dir` by path relative to it (symlinks and directories left out). */
async function filesBelow(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

/** Moves the mtime of every temp file below `dest` back by `ms`. */
async function ageTempFiles(dest: string, ms: number) {
  const then = new Date(Date.now() - ms);
  for (const path of await filesBelow(dest).catch(() => [])) {
    if (isTempFileName(path.split("/").pop() ?? "")) await utimes(join(dest, path), then, then);
  }
}

/**
 * The outputs the states below `dest` record (bundle path and output path → digest), after
 * checking that each state parses, records the whole publication of its source and holds its
 * bytes (unless it is marked as a replacement under way), and, under the release layout, that
 * `current` links to a release holding exactly the files of one of `live`.
 */
async function recordsAt(
  dest: string,
  label: string,
  live: readonly Version[],
  whole = true,
): Promise<Record<string, string>> {
  const records: Record<string, string> = {};
  const files = await filesBelow(dest).catch(() => []);
  for (const file of files.filter((path) => path.split("/").pop() === ".distributor.json")) {
    if (file.split("/").includes("releases")) continue;
    const bundle = file.slice(0, -".distributor.json".length);
    const text = await readFile(join(dest, file), "utf8");
    const state = parseDocument(text);
    const release = (state as { release?: { id: string } }).release;
    const marked = text.includes('"replacing"');
    if (!marked && whole) expectWholePublication(state, `${label}: ${file}`);
    for (const output of state.outputs) {
      const key = `${bundle}${output.path}`;
      records[key] = output.sha256;
      if (marked) continue;
      const at = release === undefined ? key : `${bundle}releases/${release.id}/${output.path}`;
      const bytes = await readFile(join(dest, at)).catch(() => undefined);
      expect(bytes && sha(bytes), `${label}: ${file} records ${at}`).toBe(output.sha256);
    }
  }
  const link = await readlink(join(dest, "current")).catch(() => undefined);
  if (link !== undefined) {
    const held = await filesBelow(join(dest, link));
    const whole = live.filter(
      (version) => JSON.stringify(held) === JSON.stringify(Object.keys(VERSIONS[version]).sort()),
    );
    expect(whole, `${label}: current (${link}) holds ${held.join(" ")}`).not.toEqual([]);
    for (const path of held) {
      const text = await readFile(join(dest, link, path), "utf8");
      expect(text, `${label}: ${link}/${path}`).toBe(VERSIONS[whole[0] as Version][path]);
    }
  }
  return records;
}

async function newCase(dir: string, scenario: Scenario): Promise<Case> {
  const dest = join(dir, "mnt", "dest");
  const clock = { offset: 0 };
  const configs = {} as Record<Version, Config>;
  for (const [index, version] of (["v1", "v2", "v3"] as const).entries()) {
    const source = createLocalBackend({ root: join(dir, version) });
    const created = (hour: number) => ({
      id: "site.example",
      created: new Date(Date.UTC(2026, 5, 4, hour)),
    });
    if (scenario.nested) {
      for (const day of [1, 2, 3]) {
        const files = VERSIONS[`v${day}` as Version];
        await writeSourceBundle(source, `days/${day}`, files, created(day));
      }
    } else {
      await writeSourceBundle(source, "", VERSIONS[version], created(index + 1));
    }
    configs[version] = parseConfig(
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${join(dir, version)}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest}${scenario.policy}\n`,
    );
  }
  return { dir, dest, clock, now: () => new Date(Date.now() + clock.offset), configs };
}

/** A copy of the device, and how many of the scenario's steps had returned when it was taken. */
interface Snapshot {
  file: string;
  done: number;
  what: string;
}

const images: string[] = [];
afterAll(() => unmountAll(images));

/** Counts over every scenario, for the closing line. */
const totals = { snapshots: 0, started: Date.now() };

async function replay(scenario: Scenario) {
  const dir = imageDirectory("distributor-ext4-");
  const image = join(dir, "dest.img");
  const mnt = join(dir, "mnt");
  images.push(image);
  try {
    makeExt4Image(image, IMAGE_MIB);
    const c = await newCase(dir, scenario);
    mountImage(image, mnt);
    const snapshots: Snapshot[] = [];
    let done = 0;
    const snapshot = (what: string) => {
      const file = join(dir, `snapshot-${snapshots.length + 1}.img`);
      copyImage(image, file);
      snapshots.push({ file, done, what });
    };
    // The destination on the image, with a copy of the device after each flush completed.
    const watched: BackendRegistry = {
      local: async (location) =>
        location.path === c.dest
          ? createFlushWatchedLocalBackend({ root: c.dest }, (flush) =>
              snapshot(flush.kind === "file" ? "a file's fsync" : `fsync of /${flush.path}`),
            )
          : createLocalBackend({ root: location.path }),
    };
    const after: Record<string, string>[] = [];
    for (const step of scenario.steps) {
      expect(await step.act(c, watched), `${scenario.name}: ${step.name}`).toBe(true);
      after.push(await recordsAt(c.dest, `${step.name}, clean`, step.live ? [step.live] : []));
      done += 1;
      snapshot(`${step.name} returned`);
    }
    unmountImage(mnt);
    const last = scenario.steps.length - 1;
    for (const [index, shot] of snapshots.entries()) {
      const label = `${scenario.name}: power cut ${index + 1} (${shot.what}, ${shot.done} commands returned)`;
      const previous = after[shot.done - 1] ?? {};
      const next = after[shot.done];
      const live = scenario.steps.slice(Math.max(0, shot.done - 1), shot.done + 1);
      mountImage(shot.file, mnt);
      const recovered = await recordsAt(
        c.dest,
        label,
        live.flatMap((step) => (step.live ? [step.live] : [])),
        !scenario.steps[shot.done]?.partial,
      );
      // What both the last reported command and the one under way promise stays recorded; no
      // record names bytes that neither of them published.
      for (const [path, digest] of Object.entries(previous)) {
        if (next === undefined || next[path] === digest) {
          expect(recovered[path], `${label}: ${path} was published`).toBe(digest);
        }
      }
      for (const [path, digest] of Object.entries(recovered)) {
        expect([previous[path], next?.[path]], `${label}: ${path}`).toContain(digest);
      }
      // The machine came back later: the interrupted command (or the last) runs again. Its
      // clock moved on, and so did the files' (a temp file of a lease write counts as another
      // run's for a minute by its mtime, and stays till a later run: not what is checked here).
      c.clock.offset += 10 * 60_000;
      await ageTempFiles(c.dest, 10 * 60_000);
      const step = scenario.steps[Math.min(shot.done, last)] as Step;
      expect(await step.act(c, undefined), `${label}: ${step.name} again`).toBe(true);
      const converged = `${label}, then ${step.name} again`;
      const records = await recordsAt(c.dest, converged, step.live ? [step.live] : []);
      expect(records, `${converged}: records`).toEqual(after[Math.min(shot.done, last)]);
      if (scenario.releases) {
        const files = await filesBelow(c.dest);
        // A run that only skips reads the state alone: an expired lease, and the temp file of a
        // lease write cut before its rename, may stay for the next write to take over and sweep
        // (as `expectAgreement` allows the lease); a live lease may not, nor any other temp file.
        const debris = files.filter(
          (path) =>
            isTempFileName(path.split("/").pop() ?? "") && !isTempFileFor(path, LEASE_FILE_NAME),
        );
        expect(debris, `${converged}: debris`).toEqual([]);
        if (files.includes(LEASE_FILE_NAME)) {
          const lease = JSON.parse(await readFile(join(c.dest, LEASE_FILE_NAME), "utf8"));
          expect(Date.parse(lease.expires_at), `${converged}: live lease`).toBeLessThan(
            Date.now() + c.clock.offset,
          );
        }
      } else {
        await expectAgreement(createLocalBackend({ root: c.dest }), {
          label: converged,
          staleLeasesAt: new Date(Date.now() + c.clock.offset),
        });
      }
      unmountImage(mnt);
      rmSync(shot.file);
      totals.snapshots += 1;
    }
    return snapshots.length;
  } finally {
    unmountAll([image]);
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(unavailable !== undefined && !CI)(
  `power cuts of ext4 on a loop device, cut at every flush${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`,
  () => {
    for (const scenario of SCENARIOS) {
      it(`${scenario.name}: every cut keeps what was published, and the next run converges`, async () => {
        if (unavailable !== undefined) {
          throw new Error(`CI=true, but ${unavailable}: the real-kernel replay cannot run`);
        }
        const count = await replay(scenario);
        // A first publication alone flushes each file, then the directories and the state.
        expect(count).toBeGreaterThan(20);
      }, 300_000);
    }
    afterAll(() => {
      console.info(
        `ext4 replay: ${totals.snapshots} power cuts checked in ${Math.round((Date.now() - totals.started) / 1000)}s`,
      );
    });
  },
);
