import { isStorageError, type StorageBackend } from "@distributor/storage";
import { afterAll, describe, expect, it } from "vitest";
import {
  type DestinationLimits,
  formatBytes,
  publishTarget,
  readDestinationStatus,
  readStateFile,
  StateTooLargeError,
  walkWithin,
} from "../../src/index.js";
import { leaseStatus } from "../../src/protocol/lease-file.js";
import {
  newBackend,
  publishTargetOptions,
  readText,
  removeTempBackends,
  useBackendKind,
  writeSourceBundle,
} from "../../src/testing/fixtures.js";

const owner = 'destination "archive" in pipeline "reports"';

/** Limits as the configuration names them, with `stateBytes` bytes of state. */
function limits(stateBytes: number, entries = 10_000_000): DestinationLimits {
  return {
    stateBytes: { value: stateBytes, setting: { key: "destinations[].max_state_size", owner } },
    entries: { value: entries, setting: { key: "destinations[].max_entries", owner } },
  };
}

/** Twenty small files: a state of a few KiB. */
function twentyFiles(tag: string): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: 20 }, (_, index) => [`page-${index}.txt`, `${tag} ${index}\n`]),
  );
}

async function everyFile(backend: StorageBackend): Promise<string[]> {
  const entries = await backend.walk("", { recursive: true, limit: 1_000 });
  return entries.filter((entry) => entry.kind === "file").map((entry) => entry.path);
}

afterAll(removeTempBackends);

describe("a destination's state size bound", () => {
  it("refuses a next state above it, naming the setting, and writes nothing", async () => {
    useBackendKind("local");
    const source = newBackend();
    const destination = newBackend();
    const manifest = await writeSourceBundle(source, "reports", twentyFiles("v1"));
    const options = publishTargetOptions(source, destination, manifest);
    const small = { ...options, plan: { ...options.plan, limits: limits(1024) } };

    const failure = await publishTarget(small).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StateTooLargeError);
    expect((failure as StateTooLargeError).code).toBe("state_too_large");
    expect((failure as Error).message).toMatch(
      /^state file local:.+\/reports\/\.distributor\.json would be \d+ bytes, more than destinations\[\]\.max_state_size \(1 KiB\) of destination "archive" in pipeline "reports"; raise it to publish this many outputs; nothing was written$/,
    );
    expect(await everyFile(destination)).toEqual([]);
    expect(await leaseStatus(destination, "reports")).toBe("absent");

    // Raised, the same publication goes through, and its state reads back within the bound.
    const raised = { ...options, plan: { ...options.plan, limits: limits(64 * 1024) } };
    const plan = await publishTarget(raised);
    expect(plan.action).toBe("publish_new");
    const state = await readStateFile(
      destination,
      "reports/.distributor.json",
      undefined,
      limits(64 * 1024).stateBytes,
    );
    expect(state.document.outputs).toHaveLength(20);
  });

  it("reports a stored state above it as too large, naming the setting", async () => {
    useBackendKind("local");
    const source = newBackend();
    const destination = newBackend();
    const manifest = await writeSourceBundle(source, "reports", twentyFiles("v1"));
    await publishTarget(publishTargetOptions(source, destination, manifest));
    const stored = await readText(destination, "reports/.distributor.json");

    const lowered = limits(1024);
    const read = await readStateFile(
      destination,
      "reports/.distributor.json",
      undefined,
      lowered.stateBytes,
    ).catch((error: unknown) => error);
    expect(isStorageError(read, "limit_exceeded")).toBe(true);
    expect((read as Error).message).toMatch(
      /^read file local:.+: state file is larger than destinations\[\]\.max_state_size \(1 KiB\) of destination "archive" in pipeline "reports"; raise it to read this state$/,
    );

    // Planning sees an unreadable state, and says why, rather than a generic invalid state.
    const { status } = await readDestinationStatus(
      destination,
      "reports",
      undefined,
      lowered.stateBytes,
    );
    expect((status.stateError as Error).message).toContain(
      'larger than destinations[].max_state_size (1 KiB) of destination "archive"',
    );
    const next = await writeSourceBundle(source, "reports", twentyFiles("v2"), {
      created: new Date("2026-06-07T09:00:00Z"),
    });
    const options = publishTargetOptions(source, destination, next);
    const plan = await publishTarget({ ...options, plan: { ...options.plan, limits: lowered } });
    expect(plan.action).toBe("fail_conflict");
    expect(plan.reason).toContain("destinations[].max_state_size (1 KiB)");
    expect(await readText(destination, "reports/.distributor.json")).toBe(stored);
  });
});

describe("a destination's listing bound", () => {
  it("fails a listing with more entries, naming the setting", async () => {
    useBackendKind("local");
    const destination = newBackend({ files: { "a/1": "1", "a/2": "2", "a/3": "3" } });
    const failure = await walkWithin(destination, "a", limits(1024, 2).entries).catch(
      (error: unknown) => error,
    );
    expect(isStorageError(failure, "limit_exceeded")).toBe(true);
    expect((failure as Error).message).toMatch(
      /: more than 2 entries \(destinations\[\]\.max_entries of destination "archive" in pipeline "reports"\); raise it to list this destination$/,
    );
    expect(await walkWithin(destination, "a", limits(1024, 3).entries)).toHaveLength(3);
  });

  it("refuses a replacement whose bundle path lists more, naming the setting", async () => {
    useBackendKind("local");
    const source = newBackend();
    const destination = newBackend();
    const first = await writeSourceBundle(source, "reports", twentyFiles("v1"));
    await publishTarget(publishTargetOptions(source, destination, first));
    // A newer source replaces the published one: the bundle path must be listed in full.
    const manifest = await writeSourceBundle(source, "reports", twentyFiles("v2"), {
      created: new Date("2026-06-07T09:00:00Z"),
    });
    const options = publishTargetOptions(source, destination, manifest);
    const plan = await publishTarget({
      ...options,
      plan: { ...options.plan, limits: limits(64 * 1024 ** 2, 1) },
    });
    expect(plan.action).toBe("fail_unmanaged");
    expect(plan.reason).toBe(
      'destination bundle path reports holds more than 1 entries (destinations[].max_entries of destination "archive" in pipeline "reports"), so it cannot be confirmed to hold only managed outputs',
    );
  });
});

describe("formatBytes", () => {
  it("writes a size in the shortest exact unit", () => {
    expect(formatBytes(64 * 1024 ** 2)).toBe("64 MiB");
    expect(formatBytes(100_000_000)).toBe("100 MB");
    expect(formatBytes(1024)).toBe("1 KiB");
    expect(formatBytes(1500)).toBe("1500 B");
  });
});
