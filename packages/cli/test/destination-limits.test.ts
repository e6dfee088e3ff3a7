import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  resultOf,
  runCli,
  singlePipelineConfig,
  snapshotTree,
  useTempDir,
  writeBundle,
} from "./helpers.js";

const tmp = useTempDir();

/** Forty small files: a state of roughly 10 KiB. */
function fortyFiles(tag: string): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: 40 }, (_, index) => [`pages/page-${index}.txt`, `${tag} ${index}\n`]),
  );
}

/** Writes the configuration of `reports` → `archive` with `extra` destination keys. */
async function configWith(source: string, destination: string, extra: string): Promise<string> {
  const path = join(tmp(), "distributor.yml");
  await writeFile(path, singlePipelineConfig(source, destination, extra));
  return path;
}

interface Action {
  action: string | null;
  status: string;
  reason: string;
  error: { code: string; message: string } | null;
}

function actionsOf(result: Awaited<ReturnType<typeof runCli>>): Action[] {
  return (resultOf(result) as { actions: Action[] }).actions;
}

describe("destinations[].max_state_size", () => {
  it("refuses a publication whose state would be larger, naming the setting, and writes nothing; raised, it publishes", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeBundle(source, "daily", "2026-06-01T00:00:00Z", fortyFiles("v1"));
    const small = await configWith(source, dest, "        max_state_size: 2KiB\n");

    const refused = await runCli(["run", "--config", small, "--format", "json"]);
    expect(refused.code).not.toBe(0);
    const [action] = actionsOf(refused);
    expect(action?.status).toBe("failed");
    expect(action?.error?.code).toBe("state_too_large");
    expect(action?.error?.message).toMatch(
      /^state file local:.+\/dest\/\.distributor\.json would be \d+ bytes, more than destinations\[\]\.max_state_size \(2 KiB\) of destination "archive" in pipeline "reports"; raise it to publish this many outputs; nothing was written$/,
    );
    expect(await snapshotTree(dest)).toEqual([]);

    const raised = await configWith(source, dest, "        max_state_size: 64KiB\n");
    const published = await runCli(["run", "--config", raised, "--format", "json"]);
    expect(published.code, published.stdout).toBe(0);
    expect(actionsOf(published)[0]).toMatchObject({ action: "publish_new", status: "published" });
    const state = JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));
    expect(state.outputs).toHaveLength(40);
  });

  it("reads a stored state only up to the setting: run and inspect say it is larger", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeBundle(source, "daily", "2026-06-01T00:00:00Z", fortyFiles("v1"));
    const roomy = await configWith(source, dest, "");
    expect((await runCli(["run", "--config", roomy])).code).toBe(0);
    const before = await snapshotTree(dest);

    // The same destination read with a lowered setting: the stored state is over it.
    await writeBundle(source, "daily", "2026-06-02T00:00:00Z", fortyFiles("v2"));
    const lowered = await configWith(source, dest, "        max_state_size: 2KiB\n");
    const setting =
      'destinations[].max_state_size (2 KiB) of destination "archive" in pipeline "reports"';

    const run = await runCli(["run", "--config", lowered, "--format", "json"]);
    expect(run.code).not.toBe(0);
    const [action] = actionsOf(run);
    expect(action?.action).toBe("fail_conflict");
    expect(action?.error?.message).toContain(`state file is larger than ${setting}`);
    expect(await snapshotTree(dest)).toEqual(before);

    const text = await runCli(["run", "--config", lowered]);
    expect(text.stdout + text.stderr).toContain(`state file is larger than ${setting}`);

    const inspected = await runCli([
      "inspect",
      "--config",
      lowered,
      "--pipeline",
      "reports",
      "--destination",
      "archive",
      "--format",
      "json",
    ]);
    expect(inspected.code).not.toBe(0);
    const envelope = envelopeOf(inspected);
    expect(envelope.error?.code).toBe("storage_limit_exceeded");
    expect(envelope.error?.message).toMatch(
      new RegExp(
        `^read file local:.+: state file is larger than ${setting.replace(/[[\]().]/g, "\\$&")}; raise it to read this state$`,
      ),
    );

    const audited = await runCli(["audit", "--config", lowered, "--format", "json"]);
    const bundles = (resultOf(audited) as { destinations: { bundles: unknown[] }[] })
      .destinations[0]?.bundles;
    expect(bundles).toEqual([
      expect.objectContaining({
        state: "invalid",
        error: expect.stringContaining(`state file is larger than ${setting}`),
      }),
    ]);
    // The text report says why too, and how to mend it.
    const auditText = await runCli(["audit", "--config", lowered]);
    expect(auditText.stdout).toMatch(
      /^State: .* error=".*state file is larger than .*max_state_size/m,
    );
    expect(`${auditText.stdout}${auditText.stderr}`).toContain("then raise the setting");
  });
});

describe("destinations[].max_entries", () => {
  it("fails a listing of the destination with more entries, naming the setting", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeBundle(source, "daily", "2026-06-01T00:00:00Z", fortyFiles("v1"));
    expect((await runCli(["run", "--config", await configWith(source, dest, "")])).code).toBe(0);
    const limited = await configWith(source, dest, "        max_entries: 10\n");

    // audit lists the whole destination root.
    const audited = await runCli(["audit", "--config", limited, "--format", "json"]);
    expect(audited.code).not.toBe(0);
    const [destination] = (
      resultOf(audited) as { destinations: { error: { code: string; message: string } | null }[] }
    ).destinations;
    expect(destination?.error?.code).toBe("storage_limit_exceeded");
    expect(destination?.error?.message).toMatch(
      /: more than 10 entries \(destinations\[\]\.max_entries of destination "archive" in pipeline "reports"\); raise it to list this destination$/,
    );

    // A replacement must list its bundle path to prove it holds nothing unmanaged.
    await writeBundle(source, "daily", "2026-06-02T00:00:00Z", fortyFiles("v2"));
    const before = await snapshotTree(dest);
    const run = await runCli(["run", "--config", limited, "--format", "json"]);
    expect(run.code).not.toBe(0);
    const [action] = actionsOf(run);
    expect(action?.action).toBe("fail_unmanaged");
    expect(action?.reason).toBe(
      'destination bundle path . holds more than 10 entries (destinations[].max_entries of destination "archive" in pipeline "reports"), so it cannot be confirmed to hold only managed outputs',
    );
    expect(await snapshotTree(dest)).toEqual(before);

    // Raised, the same replacement goes through.
    const raised = await configWith(source, dest, "        max_entries: 1000\n");
    const replaced = await runCli(["run", "--config", raised, "--format", "json"]);
    expect(replaced.code, replaced.stdout).toBe(0);
    expect(actionsOf(replaced)[0]).toMatchObject({ action: "replace_older", status: "published" });
  });
});
