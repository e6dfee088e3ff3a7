import { readFile, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { envelopeOf, resultOf, runCli, writeBundle } from "./process.js";
import { filesBelow, ownerFlags, same, site, startReader } from "./releases.js";

// Staged releases through the real CLI, on whichever destination `config` names (the local and
// SSH suites share it): stage B while A stays live, look at it, promote it, return to A, promote
// the newest staged one, refuse a staged release edited since, and follow every piece of advice
// a refusal gives exactly as written.

export const PREVIEW = "https://preview.example.org/{release}/";

interface StagingCase {
  /** Directory of the source bundle. */
  source: string;
  /** The destination bundle path as this process sees it (the SFTP root is a local directory). */
  root: string;
  config: string;
  /** Temp directory for the reader's file. */
  tmp: string;
  /** Pages per site (smaller over SSH). */
  pages: number;
}

interface Action {
  status: string;
  action: string;
  release_id: string | null;
  preview_url: string | null;
}

async function runJson(config: string, ...extra: string[]) {
  const result = await runCli(["run", "--config", config, "--format", "json", ...extra]);
  const [action] = resultOf(result).actions as Action[];
  return { result, action: action as Action };
}

const live = async (root: string) => readlink(join(root, "current"));

/** `distributor <command> …` for the suite's owner, as JSON. */
function owned(command: string, config: string, ...extra: string[]) {
  return runCli([command, ...ownerFlags(config), ...extra, "--format", "json"]);
}

export async function stagingScenario(c: StagingCase): Promise<void> {
  const A = site("A", c.pages);
  const B = site("B", c.pages);
  const C = site("C", c.pages);
  await writeBundle(c.source, "site", "2026-06-01T00:00:00Z", A);
  const first = await runJson(c.config);
  expect(first.result.code, first.result.stderr).toBe(0);
  expect(first.action.status).toBe("published");
  const linkA = await live(c.root);

  // Stage B while a reader polls `current`: it only ever sees A.
  const reader = await startReader(c.root, join(c.tmp, "expected.json"), { A });
  await writeBundle(c.source, "site", "2026-06-02T00:00:00Z", B);
  const staged = await runJson(c.config, "--stage");
  const seen = await reader.stop();
  expect(staged.result.code, staged.result.stderr).toBe(0);
  expect(staged.action.status).toBe("staged");
  const idB = staged.action.release_id as string;
  expect(idB).toMatch(/^\d{8}T/);
  expect(staged.action.preview_url).toBe(`https://preview.example.org/${idB}/`);
  expect(seen.violations).toEqual([]);
  expect(seen.seen).toEqual(["A"]);
  expect(await live(c.root)).toBe(linkA);
  expect(same(await filesBelow(join(c.root, "releases", idB)), B)).toBe(true);
  const state = JSON.parse(await readFile(join(c.root, ".distributor.json"), "utf8"));
  expect(`releases/${state.release.id}`).toBe(linkA);

  // The text report names the staged release and its preview.
  const again = await runCli(["run", "--config", c.config, "--stage"]);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toContain(" status=staged ");
  expect(again.stdout).toContain(` release=${idB} preview_url=https://preview.example.org/${idB}/`);

  // inspect and audit list it apart from the live release.
  const shown = await runCli(["inspect", ...ownerFlags(c.config)]);
  expect(shown.code, shown.stderr).toBe(0);
  const lines = shown.stdout.split("\n").filter((line) => line.startsWith("Release: "));
  expect(lines.find((line) => line.includes(`id=${idB} `))).toContain(" status=staged ");
  expect(lines.find((line) => line.includes(`id=${linkA.slice(9)} `))).toContain(" status=live ");
  const audited = await runCli(["audit", "--config", c.config]);
  expect(audited.code, audited.stdout).toBe(0);
  expect(audited.stdout).toContain(` staged=${idB}`);

  // A dry run checks it and says what it would do; nothing changes.
  const dry = await owned("promote", c.config, "--to", idB, "--dry-run");
  expect(dry.code, dry.stderr).toBe(0);
  expect(resultOf(dry)).toMatchObject({ to: idB, switched: false, dry_run: true });
  expect(await live(c.root)).toBe(linkA);

  // Promote it: current switches to exactly the bytes staged.
  const promoted = await owned("promote", c.config, "--to", idB);
  expect(promoted.code, promoted.stderr).toBe(0);
  expect(resultOf(promoted)).toMatchObject({ to: idB, from: linkA.slice(9), switched: true });
  expect(await live(c.root)).toBe(`releases/${idB}`);
  expect(same(await filesBelow(join(c.root, "current")), B)).toBe(true);
  const skipped = await runJson(c.config);
  expect(skipped.action.status).toBe("skipped");

  // Back to A; then C staged over B, and --latest picks C.
  const back = await owned("rollback", c.config, "--previous");
  expect(back.code, back.stderr).toBe(0);
  expect(await live(c.root)).toBe(linkA);
  await writeBundle(c.source, "site", "2026-06-03T00:00:00Z", C);
  const stagedC = await runJson(c.config, "--stage");
  expect(stagedC.action.status).toBe("staged");
  const idC = stagedC.action.release_id as string;
  expect(idC > idB).toBe(true);
  const latest = await owned("promote", c.config, "--latest");
  expect(latest.code, latest.stderr).toBe(0);
  expect(resultOf(latest)).toMatchObject({ to: idC, switched: true });
  expect(same(await filesBelow(join(c.root, "current")), C)).toBe(true);

  // Nothing staged any more: the refusal's advice, run exactly as written, stages one.
  const none = await owned("promote", c.config, "--latest");
  expect(none.code).not.toBe(0);
  expect(envelopeOf(none).error?.code).toBe("no_staged_release");
  const stageAdvice = adviceIn(envelopeOf(none).error?.message);
  expect(stageAdvice).toEqual(["run", "--stage", "--config", c.config, "--pipeline", "site"]);
  const D = site("D", c.pages);
  await writeBundle(c.source, "site", "2026-06-04T00:00:00Z", D);
  const advised = await runCli(stageAdvice);
  expect(advised.code, advised.stderr).toBe(0);
  expect(advised.stdout).toContain(" status=staged ");
  const idD = / release=(\S+)/.exec(advised.stdout)?.[1] as string;
  expect(idD > idC).toBe(true);

  // A staged release edited since it was staged is refused, naming the file; current stays.
  await writeFile(join(c.root, "releases", idD, "index.html"), "<h1>edited</h1>\n");
  const drift = await owned("promote", c.config, "--to", idD);
  expect(drift.code).not.toBe(0);
  expect(envelopeOf(drift).error?.code).toBe("release_drift");
  expect(envelopeOf(drift).error?.message).toContain("index.html");
  expect(await live(c.root)).toBe(`releases/${idC}`);
  // audit's advice for it: staged again, not retired by releases.keep (keep_staged keeps it).
  const audit = await runCli(["audit", "--config", c.config, "--format", "json"]);
  expect(audit.code).not.toBe(0);
  const auditAdvice = envelopeOf(audit).error?.message ?? "";
  expect(auditAdvice).toContain("a changed staged release is refused by `distributor promote`");
  expect(auditAdvice).not.toContain("changed earlier release");
  // The refusal's way out, run exactly as written: the source staged afresh, then promoted.
  const restage = adviceIn(envelopeOf(drift).error?.message);
  expect(restage).toEqual(["run", "--stage", "--config", c.config, "--pipeline", "site"]);
  const restaged = await runCli(restage);
  expect(restaged.code, restaged.stderr).toBe(0);
  const idD2 = / release=(\S+)/.exec(restaged.stdout)?.[1] as string;
  expect(idD2).not.toBe(idD);
  const promotedD = await owned("promote", c.config, "--to", idD2);
  expect(promotedD.code, promotedD.stderr).toBe(0);
  expect(resultOf(promotedD)).toMatchObject({ to: idD2, switched: true, forced: false });
  expect(await live(c.root)).toBe(`releases/${idD2}`);
  expect(same(await filesBelow(join(c.root, "current")), D)).toBe(true);

  // An earlier release is not staged: the refusal's advice, run exactly as written, returns to it.
  const older = await owned("promote", c.config, "--to", idB);
  expect(envelopeOf(older).error?.code).toBe("not_staged");
  const rollbackAdvice = adviceIn(envelopeOf(older).error?.message);
  expect(rollbackAdvice).toEqual(["rollback", "--to", idB, ...ownerFlags(c.config)]);
  const returned = await runCli(rollbackAdvice);
  expect(returned.code, returned.stderr).toBe(0);
  expect(await live(c.root)).toBe(`releases/${idB}`);

  // A plain run of a staged source makes that release live without writing it again.
  const E = site("E", c.pages);
  await writeBundle(c.source, "site", "2026-06-05T00:00:00Z", E);
  const stagedE = await runJson(c.config, "--stage");
  const idE = stagedE.action.release_id as string;
  const plain = await runJson(c.config);
  expect(plain.result.code, plain.result.stderr).toBe(0);
  expect(plain.action).toMatchObject({ status: "promoted", release_id: idE });
  expect(await live(c.root)).toBe(`releases/${idE}`);
  expect(same(await filesBelow(join(c.root, "current")), E)).toBe(true);
}

/** The `distributor …` command a refusal advises, as the arguments after `distributor`. */
function adviceIn(message: string | undefined): string[] {
  const command = /`distributor ([^`]+)`/.exec(message ?? "")?.[1];
  expect(command, message).toBeDefined();
  return (command as string).split(" ").map((word) => word.replace(/^'(.*)'$/, "$1"));
}
