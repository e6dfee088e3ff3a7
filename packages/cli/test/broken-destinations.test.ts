import { cp, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ownerFlags } from "../src/testing/index.js";
import { type CliResult, envelopeOf, runCli, useTempDir, writeBundle } from "./helpers.js";

// One verdict per broken destination: each broken `layout: releases` bundle path below is given
// to `run`, `audit`, `rollback --previous` and `reconcile-state --rebuild`, each on a fresh copy,
// and the codes they answer with are compared with the table; then every command the messages
// name is run as written, in order, and must succeed, after which `audit` finds nothing wrong.

const tmp = useTempDir();
let fixture: string;

const FILES_A = { "index.html": "<h1>A</h1>\n", "assets/f1.txt": "file 1\n" };
const FILES_B = { "index.html": "<h1>B</h1>\n", "assets/f1.txt": "file 1\n" };

function configText(source: string, dest: string, layout: string, pipeline = "site"): string {
  return `pipelines:\n  - id: ${pipeline}\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: www, backend: local, path: ${dest}, path_mapping: {mode: fixed}${layout}}\n`;
}
const RELEASES = ", layout: releases, releases: {keep: 5}";

/** Published twice (A, then B) as releases, and once in place, kept to copy for each command. */
beforeAll(async () => {
  fixture = await mkdtemp(join(tmpdir(), "distributor-broken-"));
  const source = join(fixture, "src");
  await writeBundle(source, "site", "2026-06-01T00:00:00Z", FILES_A);
  for (const [name, layout] of [
    ["releases", RELEASES],
    ["in-place", ""],
  ] as const) {
    const config = join(fixture, `${name}.yml`);
    await writeFile(config, configText(source, join(fixture, name), layout));
    expect((await runCli(["run", "--config", config])).code).toBe(0);
  }
  await writeBundle(source, "site", "2026-06-02T00:00:00Z", FILES_B);
  for (const name of ["releases", "in-place"]) {
    expect((await runCli(["run", "--config", join(fixture, `${name}.yml`)])).code).toBe(0);
  }
}, 60_000);
afterAll(async () => {
  await rm(fixture, { recursive: true, force: true });
});

interface Place {
  dir: string;
  dest: string;
  source: string;
  /** The configuration commands are run with. */
  config: string;
  /** The configuration the destination was published with. */
  original: string;
  /** Release ids, oldest first. */
  releases: string[];
}

/** A fresh copy of the fixture, the destination `which`, configured with `layout`. */
async function place(which: "releases" | "in-place", layout: string): Promise<Place> {
  const dir = join(tmp(), `case-${Math.random().toString(16).slice(2)}`);
  await cp(fixture, dir, { recursive: true, verbatimSymlinks: true });
  const dest = join(dir, which);
  const source = join(dir, "src");
  const config = join(dir, "configured.yml");
  await writeFile(config, configText(source, dest, layout));
  const original = join(dir, "original.yml");
  await writeFile(original, configText(source, dest, which === "releases" ? RELEASES : ""));
  const releases =
    which === "releases"
      ? (await readdir(join(dest, "releases"))).filter((n) => !n.endsWith(".json")).sort()
      : [];
  return { dir, dest, source, config, original, releases };
}

/** The code a command answered with: null when it succeeded. */
function codeOf(command: string, result: CliResult): string | null {
  const envelope = envelopeOf(result);
  if (command === "run") {
    const actions = (envelope.result?.actions ?? []) as Array<{ error: { code: string } | null }>;
    return actions[0]?.error?.code ?? envelope.error?.code ?? null;
  }
  if (command === "audit" && result.code !== 0) {
    const destinations = (envelope.result?.destinations ?? []) as Array<{
      error: { code: string } | null;
      bundles: Array<{ state: string; interrupted: boolean; missing_count: number }>;
    }>;
    const [destination] = destinations;
    if (destination?.error) return destination.error.code;
    // The text report's status of the bundle path, as an operator reads it.
    return statusOf(result) ?? envelope.error?.code ?? null;
  }
  return result.code === 0 ? null : (envelope.error?.code ?? "failed");
}

function statusOf(result: CliResult): string | undefined {
  const envelope = envelopeOf(result);
  const bundles = ((envelope.result?.destinations ?? []) as Array<{ bundles: unknown[] }>)[0]
    ?.bundles as Array<{
    state: string;
    interrupted: boolean;
    missing_count: number;
    changed_count: number;
    release: { recorded: string | null; current: string | null; releases: { status: string }[] };
  }>;
  const bundle = bundles?.[0];
  if (bundle === undefined) return undefined;
  if (bundle.state === "invalid") return "invalid_state";
  if (bundle.interrupted) return "interrupted";
  if (bundle.missing_count + bundle.changed_count > 0) return "drift";
  if (bundle.release.recorded !== bundle.release.current) return "not_current";
  if (bundle.release.releases.some((release) => release.status === "drift")) {
    return "release_drift";
  }
  return "ok";
}

interface BrokenCase {
  name: string;
  which: "releases" | "in-place";
  /** The layout the commands are configured with. */
  layout: string;
  breakIt(at: Place): Promise<void>;
  codes: {
    run: string | null;
    audit: string | null;
    rollback: string | null;
    rebuild: string | null;
  };
  /** The commands the messages name, in the order an operator runs them. */
  advice: (at: Place) => string[][];
  /** Words each failing command's message carries (the advice it names). */
  says?: Partial<Record<"run" | "audit" | "rollback" | "rebuild", string>>;
}

const current = (at: Place) => at.releases[at.releases.length - 1] as string;

/**
 * A bundle path published in one layout and configured with the other: `unsupported_layout` from
 * every command, and the way forward the messages give (`says`) is the layout it was published
 * with, which then works.
 */
function layoutMismatch(
  name: string,
  which: "releases" | "in-place",
  layout: string,
  says: string,
): BrokenCase {
  return {
    name,
    which,
    layout,
    breakIt: async () => undefined,
    codes: {
      run: "unsupported_layout",
      audit: "unsupported_layout",
      rollback: "unsupported_layout",
      rebuild: "unsupported_layout",
    },
    advice: (at) => [["run", "--config", at.original]],
    says: { run: says, audit: says },
  };
}
const state = (at: Place) => join(at.dest, ".distributor.json");

const CASES: BrokenCase[] = [
  {
    name: "a corrupt state",
    which: "releases",
    layout: RELEASES,
    breakIt: (at) => writeFile(state(at), "{ not json"),
    codes: {
      run: "state_invalid",
      audit: "invalid_state",
      rollback: "state_invalid",
      rebuild: null,
    },
    advice: (at) => [["reconcile-state", ...ownerFlags(at.config), "--rebuild"]],
    says: {
      run: "reconcile-state --rebuild",
      audit: "reconcile-state --rebuild",
      rollback: "reconcile-state --rebuild",
    },
  },
  {
    name: "another pipeline's state",
    which: "releases",
    layout: RELEASES,
    breakIt: async (at) => {
      const text = await readFile(state(at), "utf8");
      await writeFile(state(at), text.replace('"pipeline_id":"site"', '"pipeline_id":"other"'));
    },
    codes: { run: "not_owner", audit: "not_owner", rollback: "not_owner", rebuild: "state_valid" },
    // Nothing of this pipeline's can fix another's publication: the messages name no command.
    advice: () => [],
  },
  layoutMismatch(
    "published in place, configured as releases",
    "in-place",
    RELEASES,
    "remove layout: releases",
  ),
  layoutMismatch(
    "published as releases, configured in place",
    "releases",
    "",
    "set layout: releases again",
  ),
  {
    name: "a state marked by a killed run",
    which: "releases",
    layout: RELEASES,
    breakIt: async (at) => {
      const document = JSON.parse(await readFile(state(at), "utf8"));
      document.replacing = { run_id: "killed-run", started_at: "2026-06-02T00:00:00Z" };
      await writeFile(state(at), JSON.stringify(document));
    },
    codes: {
      run: null,
      audit: "interrupted",
      rollback: "publication_interrupted",
      rebuild: "state_valid",
    },
    advice: (at) => [
      ["run", "--config", at.config],
      ["rollback", ...ownerFlags(at.config), "--previous"],
    ],
    says: { audit: "the next `distributor run`", rollback: "distributor run" },
  },
  {
    name: "current missing",
    which: "releases",
    layout: RELEASES,
    breakIt: (at) => rm(join(at.dest, "current")),
    codes: { run: null, audit: "not_current", rollback: null, rebuild: "state_valid" },
    advice: (at) => [["run", "--config", at.config]],
    says: { audit: "the next `distributor run` switches current" },
  },
  {
    name: "current dangling",
    which: "releases",
    layout: RELEASES,
    breakIt: async (at) => {
      await rm(join(at.dest, "current"));
      await symlink("releases/20990101T000000.000Z-abcd", join(at.dest, "current"));
    },
    codes: { run: null, audit: "not_current", rollback: null, rebuild: "state_valid" },
    advice: (at) => [["run", "--config", at.config]],
  },
  {
    name: "the live release's directory missing",
    which: "releases",
    layout: RELEASES,
    breakIt: (at) => rm(join(at.dest, "releases", current(at)), { recursive: true }),
    codes: { run: null, audit: "drift", rollback: null, rebuild: "state_valid" },
    advice: (at) => [["run", "--config", at.config, "--repair"]],
    says: { audit: "distributor run --repair" },
  },
  {
    name: "the live release's snapshot missing",
    which: "releases",
    layout: RELEASES,
    breakIt: (at) => rm(join(at.dest, "releases", `${current(at)}.json`)),
    codes: { run: null, audit: "release_drift", rollback: null, rebuild: "state_valid" },
    advice: (at) => [["run", "--config", at.config]],
    says: { audit: "the next `distributor run` writes the missing snapshot" },
  },
];

describe("one verdict per broken destination", () => {
  for (const broken of CASES) {
    it(`${broken.name}: the same code from every command, and the advice works as written`, async () => {
      const commands = {
        run: (at: Place) => ["run", "--config", at.config],
        audit: (at: Place) => ["audit", "--config", at.config],
        rollback: (at: Place) => ["rollback", ...ownerFlags(at.config), "--previous"],
        rebuild: (at: Place) => ["reconcile-state", ...ownerFlags(at.config), "--rebuild"],
      } as const;
      const codes: Record<string, string | null> = {};
      for (const [name, args] of Object.entries(commands)) {
        const at = await place(broken.which, broken.layout);
        await broken.breakIt(at);
        const result = await runCli([...args(at), "--format", "json"]);
        codes[name] = codeOf(name, result);
        const said = broken.says?.[name as keyof typeof commands];
        if (said !== undefined) {
          const text = await runCli(args(await placeBroken(broken)));
          expect(
            `${text.stdout}${text.stderr}`,
            `${broken.name}: ${name} names the way out`,
          ).toContain(said);
        }
      }
      expect(codes, broken.name).toEqual(broken.codes);

      // The advice, as written, on one broken copy: each command succeeds, and then all is well.
      const at = await placeBroken(broken);
      for (const args of broken.advice(at)) {
        const result = await runCli(args);
        expect(result.code, `${broken.name}: ${args.join(" ")}: ${result.stderr}`).toBe(0);
      }
      if (broken.advice(at).length > 0) {
        const config = broken.advice(at).some((args) => args.includes(at.original))
          ? at.original
          : at.config;
        const audited = await runCli(["audit", "--config", config]);
        expect(audited.code, `${broken.name}: audit after the advice: ${audited.stdout}`).toBe(0);
        if (broken.which === "releases" && config === at.config) {
          expect(await readlink(join(at.dest, "current"))).toMatch(/^releases\//);
        }
      }
    }, 120_000);
  }
});

async function placeBroken(broken: BrokenCase): Promise<Place> {
  const at = await place(broken.which, broken.layout);
  await broken.breakIt(at);
  return at;
}
