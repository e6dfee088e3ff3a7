import {
  copyFile,
  cp,
  mkdtemp,
  readFile,
  readlink,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ownerFlags, releaseIds, TRUST_FILES_A, TRUST_FILES_B } from "../src/testing/index.js";
import { envelopeOf, resultOf, runCli, useTempDir, writeBundle } from "./helpers.js";

// Release history an operator can trust, through the real CLI on the local filesystem: an edit
// in place (which reaches every release sharing the file's inode) is never linked into the next
// release, is found by `audit` in every kept release, and makes `rollback` refuse that release
// unless forced; and a broken destination gets one code from every command, while the command
// each message names succeeds when run as written.

const tmp = useTempDir();

const FILES_A = TRUST_FILES_A;
const FILES_B = TRUST_FILES_B;

async function setUp(
  layout = "layout: releases, releases: {keep: 5}",
  name = "a",
  destRoot: string = tmp(),
) {
  const source = join(tmp(), name, "src");
  const dest = join(destRoot, name, "www");
  const config = join(tmp(), `${name}.yml`);
  await writeFile(
    config,
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: www, backend: local, path: ${dest}, path_mapping: {mode: fixed}, ${layout}}\n`,
  );
  return { source, dest, config };
}

describe("release history after an edit in place", () => {
  it("writes the edited file again, audits every kept release, and refuses to roll back to it unless forced", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [first] = await releaseIds(dest);

    // Same size, written through the name `current` serves: the inode every release shares.
    await writeFile(join(dest, "current/assets/f2.txt"), "file 2Z");
    expect(await readFile(join(dest, `releases/${first}/assets/f2.txt`), "utf8")).toBe("file 2Z");

    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    const published = await runCli(["run", "--config", config, "--format", "json"]);
    expect(published.code, published.stderr).toBe(0);
    const [action] = resultOf(published).actions as Array<{
      status: string;
      warnings: Array<{ code: string; paths: string[] }>;
      outputs: Array<{ path: string }>;
    }>;
    expect(action?.status).toBe("published");
    expect(action?.warnings).toEqual([
      expect.objectContaining({ code: "release_files_rewritten", paths: ["assets/f2.txt"] }),
    ]);
    // The edited file is written from the source, with the changed index.
    expect(action?.outputs.map((o) => o.path).sort()).toEqual(["assets/f2.txt", "index.html"]);
    expect(await readFile(join(dest, "current/assets/f2.txt"), "utf8")).toBe("file 2\n");
    const second = (await releaseIds(dest)).find((id) => id !== first) as string;
    expect(await readlink(join(dest, "current"))).toBe(`releases/${second}`);

    // audit: the live release is whole, the kept one changed, named with the file.
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code).toBe(1);
    expect(audited.stdout).toContain(
      `Drift: pipeline=site destination=www bundle=. release=${first} path=assets/f2.txt status=changed`,
    );
    expect(audited.stdout).toContain(`release=${second} current=true status=ok`);
    const narrowed = await runCli(["audit", "--config", config, "--release", "current"]);
    expect(narrowed.code, narrowed.stdout).toBe(0);

    // rollback to it: refused, current unchanged; --verify finds it by digest too.
    for (const extra of [[], ["--verify"]]) {
      const refused = await runCli([
        "rollback",
        ...ownerFlags(config),
        "--previous",
        ...extra,
        "--format",
        "json",
      ]);
      expect(refused.code).toBe(1);
      expect(envelopeOf(refused).error?.code).toBe("release_drift");
      expect(envelopeOf(refused).error?.message).toContain("assets/f2.txt");
      expect(await readlink(join(dest, "current"))).toBe(`releases/${second}`);
    }
    // The advice in the message, as written: --force switches, and says so.
    const forced = await runCli(["rollback", ...ownerFlags(config), "--previous", "--force"]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain("status=switched");
    expect(forced.stdout).toContain("forced=true");
    expect(forced.stdout).toContain("  changed assets/f2.txt");
    expect(await readlink(join(dest, "current"))).toBe(`releases/${first}`);

    // Back to the intact release: checked and switched without force.
    const back = await runCli(["rollback", ...ownerFlags(config), "--to", second, "--verify"]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toContain("checked=digests");
  }, 60_000);

  it("a repair writes a release of its own, which neither retention nor --previous takes for the previous publication", async () => {
    const { source, dest, config } = await setUp("layout: releases, releases: {keep: 2}");
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [a, b] = await releaseIds(dest);
    // index.html is B's own file (A has another): the edit reaches B alone.
    await writeFile(join(dest, "current/index.html"), "<h1>X</h1>\n");
    const repaired = await runCli(["run", "--config", config, "--repair", "--format", "json"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    const [action] = resultOf(repaired).actions as Array<{ warnings: Array<{ paths: string[] }> }>;
    expect(action?.warnings[0]?.paths).toEqual(["index.html"]);
    expect(await readFile(join(dest, "current/index.html"), "utf8")).toBe("<h1>B</h1>\n");
    // keep: 2 holds the repaired release and the edited one; A stays as the previous publication.
    const kept = await releaseIds(dest);
    expect(kept).toHaveLength(3);
    expect(kept.slice(0, 2)).toEqual([a, b]);
    const back = await runCli([
      "rollback",
      ...ownerFlags(config),
      "--previous",
      "--format",
      "json",
    ]);
    expect(back.code, back.stderr).toBe(0);
    expect(resultOf(back)).toMatchObject({ to: a, switched: true, forced: false });
    expect(await readFile(join(dest, "current/index.html"), "utf8")).toBe("<h1>A</h1>\n");
  }, 60_000);

  it("a destination copied elsewhere (new inodes, same bytes) is intact: identities are confirmed by digests", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    // As a restore from a backup would: every file a new inode and modification time.
    const moved = `${dest}.old`;
    await rename(dest, moved);
    await cp(moved, dest, { recursive: true, verbatimSymlinks: true });
    await rm(moved, { recursive: true });
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    const back = await runCli(["rollback", ...ownerFlags(config), "--previous"]);
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).not.toContain("forced");
    const forward = await runCli(["run", "--config", config, "--format", "json"]);
    expect(forward.code, forward.stderr).toBe(0);
    const [action] = resultOf(forward).actions as Array<{ action: string; warnings: unknown[] }>;
    expect(action?.warnings).toEqual([]);
  }, 60_000);

  it("a rewritten copy (a rename over the name) changes no other release", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    // Replacing the name (not the inode) in the live release leaves the earlier one intact.
    const live = join(dest, "current/assets/f1.txt");
    await writeFile(`${live}.new`, "other\n");
    await rm(live);
    await copyFile(`${live}.new`, live);
    await rm(`${live}.new`);
    const rolled = await runCli(["rollback", ...ownerFlags(config), "--previous"]);
    expect(rolled.code, rolled.stderr).toBe(0);
    expect(await readFile(join(dest, "current/assets/f1.txt"), "utf8")).toBe("file 1\n");
  }, 60_000);
});

/**
 * A directory on a filesystem that clones files (XFS made with reflink=1, or btrfs), which
 * `.ci/run` mounts from a loop image; unset where the machine cannot mount one.
 */
const REFLINK_DIR = process.env.DISTRIBUTOR_REFLINK_DIR;

describe("how a release gets the files it keeps", () => {
  it("falls back to hard links where the filesystem has no clones, and says which in the identity record", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [first, second] = await releaseIds(dest);
    const record = JSON.parse(
      await readFile(join(dest, "releases", `${second}.files.json`), "utf8"),
    ) as { carried?: string };
    const { ino: a } = await stat(join(dest, "releases", first as string, "assets/f1.txt"));
    const { ino: b } = await stat(join(dest, "releases", second as string, "assets/f1.txt"));
    if (record.carried === "hard_link") expect(a).toBe(b);
    else {
      // This temp directory's filesystem clones: each release has its own inode.
      expect(record.carried).toBe("clone");
      expect(a).not.toBe(b);
    }
  }, 60_000);

  it.skipIf(REFLINK_DIR === undefined && process.env.CI !== "true")(
    "clones on a filesystem that has them: an edit in place stays in the release it was made in",
    async () => {
      if (REFLINK_DIR === undefined) {
        throw new Error("DISTRIBUTOR_REFLINK_DIR is not set: .ci/run mounts an XFS image for it");
      }
      const root = await mkdtemp(join(REFLINK_DIR, "release-trust-"));
      try {
        const { source, dest, config } = await setUp(undefined, "clones", root);
        await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
        expect((await runCli(["run", "--config", config])).code).toBe(0);
        await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
        const published = await runCli(["run", "--config", config, "--format", "json"]);
        expect(published.code, published.stderr).toBe(0);
        const [first, second] = await releaseIds(dest);
        const record = JSON.parse(
          await readFile(join(dest, "releases", `${second}.files.json`), "utf8"),
        ) as { carried?: string };
        expect(record.carried).toBe("clone");
        // Kept files are their own inodes, and only the changed index was written.
        const outputs = (resultOf(published).actions as Array<{ outputs: unknown[] }>)[0]?.outputs;
        expect(outputs).toHaveLength(1);
        const inode = async (id: string) =>
          (await stat(join(dest, "releases", id, "assets/f2.txt"))).ino;
        expect(await inode(first as string)).not.toBe(await inode(second as string));

        // An edit in place of the live release does not reach the earlier one.
        await writeFile(join(dest, "current/assets/f2.txt"), "file 2Z");
        expect(await readFile(join(dest, `releases/${first}/assets/f2.txt`), "utf8")).toBe(
          "file 2\n",
        );
        const audited = await runCli(["audit", "--config", config]);
        expect(audited.code).toBe(1);
        expect(audited.stdout).toContain(`release=${first} current=false status=ok`);
        expect(audited.stdout).toContain(`release=${second} current=true status=drift`);
        const rolled = await runCli(["rollback", ...ownerFlags(config), "--previous", "--verify"]);
        expect(rolled.code, rolled.stderr).toBe(0);
        expect(await readFile(join(dest, "current/assets/f2.txt"), "utf8")).toBe("file 2\n");
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    },
    60_000,
  );
});

describe("one verdict per broken destination", () => {
  it("restores a corrupt state from the snapshot of the release current links to, as run, audit and rollback advise", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const [only] = await releaseIds(dest);
    await writeFile(join(dest, ".distributor.json"), "{ not json");

    const run = await runCli(["run", "--config", config, "--format", "json"]);
    expect(run.code).toBe(1);
    const [action] = resultOf(run).actions as Array<{ error: { code: string; message: string } }>;
    expect(action?.error.code).toBe("state_invalid");
    expect(action?.error.message).toContain("distributor reconcile-state --rebuild");
    const audited = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(audited.code).toBe(1);
    expect(envelopeOf(audited).error?.message).toContain("distributor reconcile-state --rebuild");
    expect(envelopeOf(audited).error?.message).not.toContain("switches current");
    const rolled = await runCli(["rollback", ...ownerFlags(config), "--to", only as string]);
    expect(rolled.code).toBe(1);
    expect(rolled.stderr).toContain("reconcile-state --rebuild");
    const rolledJson = await runCli([
      "rollback",
      ...ownerFlags(config),
      "--to",
      only as string,
      "--format",
      "json",
    ]);
    expect(envelopeOf(rolledJson).error?.code).toBe("state_invalid");

    // What every message names, as written (with the destination chosen).
    const rebuilt = await runCli([
      "reconcile-state",
      ...ownerFlags(config),
      "--rebuild",
      "--format",
      "json",
    ]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(resultOf(rebuilt)).toMatchObject({
      changed: true,
      bundles: [expect.objectContaining({ restored_release: only })],
    });
    expect(await readFile(join(dest, ".distributor.json"))).toEqual(
      await readFile(join(dest, "releases", `${only}.json`)),
    );
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
    const again = await runCli(["run", "--config", config, "--format", "json"]);
    expect((resultOf(again).actions as Array<{ action: string }>)[0]?.action).toBe("skip_same");
    // A valid state is not rebuilt.
    const valid = await runCli([
      "reconcile-state",
      ...ownerFlags(config),
      "--rebuild",
      "--format",
      "json",
    ]);
    expect(valid.code).toBe(1);
    expect(envelopeOf(valid).error?.code).toBe("state_valid");
    // Its dry run answers the same, rather than reporting a change it would not make.
    const dry = await runCli([
      "reconcile-state",
      ...ownerFlags(config),
      "--rebuild",
      "--dry-run",
      "--format",
      "json",
    ]);
    expect(envelopeOf(dry).error?.code).toBe("state_valid");
  }, 60_000);

  it("restores a corrupt state when current is missing, from the newest committed release", async () => {
    const { source, dest, config } = await setUp();
    await writeBundle(source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.b", "2026-06-02T00:00:00Z", FILES_B);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const newest = (await releaseIds(dest)).at(-1) as string;
    await writeFile(join(dest, ".distributor.json"), "");
    await rm(join(dest, "current"));
    const rebuilt = await runCli(["reconcile-state", ...ownerFlags(config), "--rebuild"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(await readlink(join(dest, "current"))).toBe(`releases/${newest}`);
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
  }, 60_000);

  it("gives unsupported_layout from every command for a layout mismatch, both ways", async () => {
    // Published in place, then configured as releases.
    const inPlace = await setUp("");
    await writeBundle(inPlace.source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", inPlace.config])).code).toBe(0);
    const asReleases = join(tmp(), "as-releases.yml");
    await writeFile(
      asReleases,
      (await readFile(inPlace.config, "utf8")).replace(
        "path_mapping: {mode: fixed}, ",
        "path_mapping: {mode: fixed}, layout: releases",
      ),
    );
    const codes = await everyCommand(asReleases);
    expect(codes).toEqual({
      run: "unsupported_layout",
      audit: "unsupported_layout",
      rollback: "unsupported_layout",
      reconcile: "unsupported_layout",
      rebuild: "unsupported_layout",
    });

    // Published as releases, then configured in place.
    const released = await setUp(undefined, "b");
    await writeBundle(released.source, "site.a", "2026-06-01T00:00:00Z", FILES_A);
    expect((await runCli(["run", "--config", released.config])).code).toBe(0);
    const asInPlace = join(tmp(), "as-in-place.yml");
    await writeFile(
      asInPlace,
      (await readFile(released.config, "utf8")).replace(
        ", layout: releases, releases: {keep: 5}",
        "",
      ),
    );
    const back = await everyCommand(asInPlace);
    expect(back).toEqual({
      run: "unsupported_layout",
      audit: "unsupported_layout",
      rollback: "unsupported_layout",
      reconcile: "unsupported_layout",
      rebuild: "unsupported_layout",
    });
    // The way forward each message gives: the original configuration works again.
    expect((await runCli(["audit", "--config", released.config])).code).toBe(0);
    expect((await runCli(["audit", "--config", inPlace.config])).code).toBe(0);
  }, 120_000);
});

/** The code each command gives (run: its action's; the others: the envelope's). */
async function everyCommand(config: string): Promise<Record<string, string | undefined>> {
  const json = ["--format", "json"];
  const run = await runCli(["run", "--config", config, ...json]);
  const audit = await runCli(["audit", "--config", config, ...json]);
  const rollback = await runCli(["rollback", ...ownerFlags(config), "--previous", ...json]);
  const reconcile = await runCli(["reconcile-state", ...ownerFlags(config), ...json]);
  const rebuild = await runCli(["reconcile-state", ...ownerFlags(config), "--rebuild", ...json]);
  const auditResult = envelopeOf(audit).result as {
    destinations: Array<{ error: { code: string } | null }>;
  } | null;
  return {
    run: (resultOf(run).actions as Array<{ error: { code: string } | null }>)[0]?.error?.code,
    audit: auditResult?.destinations[0]?.error?.code ?? envelopeOf(audit).error?.code,
    rollback: envelopeOf(rollback).error?.code,
    reconcile: envelopeOf(reconcile).error?.code,
    rebuild: envelopeOf(rebuild).error?.code,
  };
}
