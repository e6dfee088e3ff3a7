import { join } from "node:path";
import { expect } from "vitest";
import { type CliResult, sha256Of, writeBundle } from "./process.js";

// What a success report promises (docs/operations.md), as scenarios through the real CLI process
// that each backend's suite runs against its own server: after an exit 0 the destination holds the
// whole publication of the source its state records, under the configuration in force.

/** Destination keys a scenario turns on and off; each backend writes them in its own config. */
export interface DestinationKeys {
  fixed?: boolean;
  html?: boolean;
}

/** One destination of one pipeline (`reports`), seen through the CLI and the store's own API. */
export interface CompletenessHarness {
  /** The `id` of the destination, as report lines name it. */
  destinationId: string;
  /** A scratch directory on the local filesystem for the sources. */
  workDir(): string;
  /** Writes the config publishing `source` with `keys`; returns its path (the same each call). */
  configure(source: string, keys: DestinationKeys): Promise<string>;
  run(args: readonly string[]): Promise<CliResult>;
  spawn(args: readonly string[]): { done: Promise<CliResult>; kill(signal: NodeJS.Signals): void };
  /** Every stored path below the destination (the state included) → `fingerprint` of its bytes. */
  stored(): Promise<Record<string, string>>;
  /** As `stored`, for these paths only (those that exist); a cheaper look, where there is one. */
  storedAt?(paths: readonly string[]): Promise<Record<string, string>>;
  /** What `stored` shows for a file holding `text` (a digest, or an ETag). */
  fingerprint(text: string): string;
  /** The destination's parsed `.distributor.json`. */
  state(): Promise<StoredState>;
}

export interface StoredState {
  source: { manifest: { created: string } };
  outputs: Array<{ path: string; sha256: string; kind: string }>;
}

interface Action {
  action: string | null;
  status: string;
  reason: string;
  outputs: Array<{ path: string; kind: string }>;
}

/** The single action of a one-destination `run --format json`. */
export function actionOf(result: CliResult): Action {
  const actions = JSON.parse(result.stdout).result.actions as Action[];
  expect(actions).toHaveLength(1);
  return actions[0] as Action;
}

/**
 * The destination holds exactly `bundle` besides its state, and the state records exactly those
 * outputs with their digests and names `created` as its source.
 */
export async function expectExactly(
  harness: CompletenessHarness,
  bundle: Record<string, string>,
  created: string,
): Promise<void> {
  const stored = await harness.stored();
  delete stored[".distributor.json"];
  const expected = Object.fromEntries(
    Object.entries(bundle).map(([path, text]) => [path, harness.fingerprint(text)]),
  );
  // Compared by count first: a diff of two 5 000-entry objects is unreadable.
  expect(Object.keys(stored).length).toBe(Object.keys(expected).length);
  expect(stored).toEqual(expected);
  const state = await harness.state();
  expect(state.source.manifest.created).toBe(created);
  expect(Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256]))).toEqual(
    Object.fromEntries(Object.entries(bundle).map(([path, text]) => [path, sha256Of(text)])),
  );
}

/**
 * Bundles A and B of the rollback scenario, `count` files each way: B rewrites 88 % of A's files,
 * keeps 10 %, drops 2 % and adds 2 % of new ones.
 */
export function rollbackBundles(count: number) {
  const changed = Math.round(count * 0.88);
  const kept = Math.round(count * 0.98);
  const added = Math.round(count * 0.02);
  const pathOf = (i: number) =>
    `d${String(Math.floor(i / 250)).padStart(3, "0")}/f${String(i).padStart(6, "0")}.txt`;
  const a: Record<string, string> = {};
  for (let i = 0; i < count; i++) a[pathOf(i)] = `A ${i}\n`;
  const b: Record<string, string> = {};
  for (let i = 0; i < kept; i++) b[pathOf(i)] = i < changed ? `B ${i}\n` : `A ${i}\n`;
  for (let i = 0; i < added; i++) b[`new/n${String(i).padStart(5, "0")}.txt`] = `B new ${i}\n`;
  return {
    count,
    changed,
    a,
    b,
    aCreated: "2026-06-04T09:00:00Z",
    bCreated: "2026-06-04T10:00:00Z",
    /** The paths where B's bytes differ from what A left there (or where A has nothing). */
    bOnly: Object.keys(b).filter((path) => a[path] !== b[path]),
  };
}

export type RollbackBundles = ReturnType<typeof rollbackBundles>;

/**
 * Publishes A, starts replacing it with B and stops that run with `signal` once about 30 % of B
 * has landed, then puts A back as the source: a plain run must complete A exactly (action
 * `complete`), audit must be clean, a further run must skip, and B must then replace A as usual.
 */
export async function rollbackAfterInterruptedReplacement(
  harness: CompletenessHarness,
  bundles: RollbackBundles,
  signal: "SIGKILL" | "SIGINT",
): Promise<void> {
  const { a, b, bOnly, aCreated, bCreated } = bundles;
  const srcA = join(harness.workDir(), "a");
  const srcB = join(harness.workDir(), "b");
  await writeBundle(srcA, "reports", aCreated, a);
  await writeBundle(srcB, "reports", bCreated, b);
  const holdingB = async (paths: readonly string[] = bOnly) => {
    const stored = harness.storedAt ? await harness.storedAt(paths) : await harness.stored();
    return paths.filter((path) => stored[path] === harness.fingerprint(b[path] as string));
  };
  // While B runs, every tenth path of it is looked at: a look must be short next to the run.
  const sample = bOnly.filter((_, i) => i % 10 === 0);

  const configPath = await harness.configure(srcA, { fixed: true });
  const first = await harness.run(["run", "--config", configPath]);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toContain(`action=publish_new status=published outputs=${bundles.count}`);

  await harness.configure(srcB, { fixed: true });
  const victim = harness.spawn(["run", "--config", configPath, "--format", "json"]);
  let exited: CliResult | undefined;
  void victim.done.then((result) => {
    exited = result;
  });
  // The run is frozen (SIGSTOP) while the destination is looked at, and let go for a short slice
  // between looks, so it cannot race ahead of the check however loaded the machine is: it stops
  // within one slice of writes after 30 % of B has landed.
  const deadline = Date.now() + 120_000;
  for (;;) {
    victim.kill("SIGSTOP");
    const seen = (await holdingB(sample)).length;
    if (seen >= 0.3 * sample.length) break;
    victim.kill("SIGCONT");
    if (exited !== undefined) throw new Error(`the run ended first: ${JSON.stringify(exited)}`);
    if (Date.now() > deadline)
      throw new Error(`the run wrote only ${seen} of ${sample.length} sampled files in 120 s`);
    // Longer slices while it is still planning, short ones once its writes have begun.
    await new Promise((resolve) => setTimeout(resolve, seen === 0 ? 200 : 30));
  }
  victim.kill(signal);
  victim.kill("SIGCONT");
  const stopped = await victim.done;
  if (signal === "SIGKILL") {
    expect(stopped.code).toBeNull();
  } else {
    // The first SIGINT stops the run cleanly: the envelope says it was interrupted.
    expect(stopped.code, stopped.stderr).toBe(1);
    const envelope = JSON.parse(stopped.stdout);
    expect(envelope.error?.code).toBe("aborted");
    expect(envelope.result?.interrupted).toBe(true);
  }
  // Stopped before its commit: the state still names A, and files A had were overwritten in
  // place with B's bytes.
  const overwritten = (await holdingB()).filter((path) => path in a);
  expect((await harness.state()).source.manifest.created).toBe(aCreated);
  expect(overwritten.length).toBeGreaterThan(0);
  expect(overwritten.length).toBeLessThan(bundles.changed);

  // Back to A: recovery drops what the stopped run overwrote, and the skip becomes `complete`.
  await harness.configure(srcA, { fixed: true });
  const back = await harness.run(["run", "--config", configPath, "--format", "json"]);
  expect(back.code, back.stderr).toBe(0);
  const completed = actionOf(back);
  expect(completed).toMatchObject({ action: "complete", status: "published" });
  expect(completed.reason).toContain("not recorded");
  const written = completed.outputs.map((o) => o.path);
  for (const path of written) expect(a).toHaveProperty([path]);
  expect(new Set(written).size).toBe(written.length);
  for (const path of overwritten) expect(written).toContain(path);
  await expectExactly(harness, a, aCreated);
  const audited = await harness.run(["audit", "--config", configPath, "--format", "json"]);
  expect(audited.code, audited.stdout).toBe(0);
  expect(JSON.parse(audited.stdout).result).toMatchObject({
    checked_count: bundles.count,
    ok_count: bundles.count,
    incomplete_count: 0,
    drift: false,
  });
  const again = await harness.run(["run", "--config", configPath]);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toContain("action=skip_same status=skipped");

  // And forward to B again: an ordinary replacement.
  await harness.configure(srcB, { fixed: true });
  const forward = await harness.run(["run", "--config", configPath, "--format", "json"]);
  expect(forward.code, forward.stderr).toBe(0);
  expect(actionOf(forward)).toMatchObject({ action: "replace_older", status: "published" });
  await expectExactly(harness, b, bCreated);
  const total = Object.keys(b).length;
  const clean = await harness.run(["audit", "--config", configPath]);
  expect(clean.code, clean.stdout + clean.stderr).toBe(0);
  expect(clean.stdout).toContain(
    `status=ok checked=${total} ok=${total} missing=0 changed=0 unmanaged=0 incomplete=0`,
  );
}

/**
 * Publishes Markdown without HTML, turns the HTML output on (audit names what the records lack, a
 * plain run writes exactly that), then off again (a plain run deletes it and writes nothing);
 * every step ends with a clean audit and a skipping run.
 */
export async function htmlTurnedOnAndOff(harness: CompletenessHarness): Promise<void> {
  const files = {
    "report.md": "# Report\n\nSunny.\n",
    "notes/guide.md": "# Guide\n\nRead me.\n",
    "data.csv": "a,b\n1,2\n",
  };
  const created = "2026-06-04T10:00:00Z";
  const source = join(harness.workDir(), "src");
  const where = `pipeline=reports destination=${harness.destinationId} bundle=.`;
  await writeBundle(source, "reports.daily", created, files);
  const configPath = await harness.configure(source, {});
  const first = await harness.run(["run", "--config", configPath]);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toContain("action=publish_new status=published outputs=3");
  await expectExactly(harness, files, created);

  await harness.configure(source, { html: true });
  const lacking = await harness.run(["audit", "--config", configPath]);
  expect(lacking.code).toBe(1);
  expect(lacking.stdout).toContain(
    `Audit: ${where} status=incomplete checked=3 ok=3 missing=0 changed=0 unmanaged=0 incomplete=2`,
  );
  for (const path of ["notes/guide.html", "report.html"]) {
    expect(lacking.stdout).toContain(`Incomplete: ${where} path=${path} status=not_recorded`);
  }
  expect(lacking.stderr).toContain("plain `distributor run`");

  const on = await harness.run(["run", "--config", configPath, "--format", "json"]);
  expect(on.code, on.stderr).toBe(0);
  const completed = actionOf(on);
  expect(completed).toMatchObject({ action: "complete", status: "published" });
  expect(completed.outputs.map((o) => [o.path, o.kind])).toEqual([
    ["notes/guide.html", "generated"],
    ["report.html", "generated"],
  ]);
  const withHtml = await harness.state();
  expect(withHtml.outputs.map((o) => [o.path, o.kind]).sort()).toEqual([
    ["data.csv", "source"],
    ["notes/guide.html", "generated"],
    ["notes/guide.md", "source"],
    ["report.html", "generated"],
    ["report.md", "source"],
  ]);
  const stored = await harness.stored();
  expect(Object.keys(stored).sort()).toEqual([
    ".distributor.json",
    "data.csv",
    "notes/guide.html",
    "notes/guide.md",
    "report.html",
    "report.md",
  ]);
  const auditedOn = await harness.run(["audit", "--config", configPath]);
  expect(auditedOn.code, auditedOn.stdout + auditedOn.stderr).toBe(0);
  expect(auditedOn.stdout).toContain("status=ok checked=5 ok=5");
  const skipOn = await harness.run(["run", "--config", configPath]);
  expect(skipOn.stdout).toContain("action=skip_same status=skipped");

  // Off: the HTML records are no longer produced; a plain run deletes them and writes nothing.
  await harness.configure(source, {});
  const extra = await harness.run(["audit", "--config", configPath, "--format", "json"]);
  expect(extra.code).toBe(1);
  const envelope = JSON.parse(extra.stdout);
  expect(envelope.error?.code).toBe("drift");
  expect(envelope.result.destinations[0].bundles[0].incomplete).toEqual([
    { path: "notes/guide.html", status: "not_produced" },
    { path: "report.html", status: "not_produced" },
  ]);
  const off = await harness.run(["run", "--config", configPath, "--format", "json"]);
  expect(off.code, off.stderr).toBe(0);
  expect(actionOf(off)).toMatchObject({ action: "complete", status: "published", outputs: [] });
  await expectExactly(harness, files, created);
  const skipOff = await harness.run(["run", "--config", configPath]);
  expect(skipOff.code, skipOff.stderr).toBe(0);
  expect(skipOff.stdout).toContain("action=skip_same status=skipped");
  const auditedOff = await harness.run(["audit", "--config", configPath]);
  expect(auditedOff.code, auditedOff.stdout + auditedOff.stderr).toBe(0);
}
