import { buildManifest, type Manifest } from "@distributor/bundle";
import { ownerScope, serializeDocument } from "@distributor/state";
import type { StorageBackend } from "@distributor/storage";
import { afterAll, describe, expect, it } from "vitest";
import {
  DEFAULT_DESTINATION_LIMITS,
  LeaseTooLargeError,
  MAX_STATE_BYTES,
  publishTarget,
  StateTooLargeError,
} from "../../src/index.js";
import { acquireLease } from "../../src/protocol/acquire-lease.js";
import { leaseStatus } from "../../src/protocol/lease-file.js";
import {
  newBackend,
  publishTargetOptions,
  readText,
  removeTempBackends,
  singleOwnerState,
  useBackendKind,
  writeSourceBundle,
} from "../../src/testing/fixtures.js";

/**
 * A bundle of `count` files with paths of about 1 000 characters (four 200-character
 * directories), `tag` telling bundles apart. A state records each path twice and its embedded
 * manifest once, so 14 000 files make a state of about 48 MB; a lease journals each path an
 * attempt may create once, so 17 000 files make a lease of about 17.4 MB.
 */
function longPathManifest(count: number, tag: string, created: Date): Manifest {
  const directories = ["d", "e", "f", "g"].map((letter) => letter.repeat(200)).join("/");
  return buildManifest({
    id: "reports.example",
    created,
    files: Array.from({ length: count }, (_, index) => ({
      path: `${directories}/${tag}${String(index).padStart(6, "0")}-${"x".repeat(180)}.txt`,
      sha256: `sha256:${index.toString(16).padStart(64, "0")}`,
      size: index,
    })),
  });
}

/** Every file below the root, in order. */
async function everyFile(backend: StorageBackend): Promise<string[]> {
  const entries = await backend.walk("", { recursive: true, limit: 100_000 });
  return entries.filter((entry) => entry.kind === "file").map((entry) => entry.path);
}

afterAll(removeTempBackends);

describe("a next state too large to read back", () => {
  it("is refused before anything is written: a merge that would outgrow the state file", {
    timeout: 60_000,
  }, async () => {
    useBackendKind("local");
    const source = newBackend();
    const destination = newBackend();
    // A merge destination already recording 14 000 long paths (a 48 MB state).
    const earlier = longPathManifest(14_000, "a", new Date("2026-06-05T09:00:00Z"));
    const recorded = serializeDocument(
      singleOwnerState(earlier, { reconciliation: "merge", at: new Date("2026-06-05T10:00:00Z") }),
    );
    await destination.writeFile("reports/.distributor.json", recorded, { overwrite: false });
    // The next bundle adds 14 000 more: merged, the state would be about 80 MB.
    const next = longPathManifest(14_000, "b", new Date("2026-06-06T09:00:00Z"));
    const options = publishTargetOptions(source, destination, next, { reconciliation: "merge" });
    // A dry run says so too, instead of reporting a publication that would then be refused.
    const dryRun = await publishTarget({ ...options, dryRun: true }).catch((error) => error);
    expect(dryRun).toBeInstanceOf(StateTooLargeError);
    const failure = await publishTarget(options).catch((error) => error);
    expect(failure).toBeInstanceOf(StateTooLargeError);
    expect(failure.code).toBe("state_too_large");
    expect(failure.message).toMatch(
      new RegExp(
        `^state file local:.+/reports/\\.distributor\\.json would be \\d+ bytes, more than the ${MAX_STATE_BYTES} bytes \\(64 MiB\\) a state file may have \\(it could not be read back\\); nothing was written$`,
      ),
    );
    // The state is the one that was there, readable by the next run; no output and no lease.
    expect(await readText(destination, "reports/.distributor.json")).toBe(recorded);
    expect(await everyFile(destination)).toEqual(["reports/.distributor.json"]);
    expect(await leaseStatus(destination, "reports")).toBe("absent");
  });
});

describe("a journal too large for the lease", () => {
  it("is refused before it is written, naming the bound and the setting that raises it", async () => {
    useBackendKind("local");
    const destination = newBackend();
    const paths = longPathManifest(17_000, "a", new Date("2026-06-05T09:00:00Z")).files.map(
      (file) => file.path,
    );
    // Without a destination's setting: the 16 MiB every lease may have.
    const plain = await acquireLease(destination, "reports", ownerScope("reports", "archive"));
    const refused = await plain.journal(paths, [""]).catch((error) => error);
    expect(refused).toBeInstanceOf(LeaseTooLargeError);
    expect(refused.code).toBe("lease_too_large");
    expect(refused.message).toMatch(
      /^lease local:.+\/reports\/\.distributor\.lease\.json would be \d+ bytes, more than the 16773120 a journaled lease may have: the attempt journals 17000 paths; nothing was written$/,
    );
    expect(plain.journaled).toEqual([]);
    await plain.release();
    expect(await leaseStatus(destination, "reports")).toBe("absent");
    // Under a destination's max_state_size: the larger of the two, the setting named.
    const setting = { key: "destinations[].max_state_size", owner: 'destination "archive"' };
    const limits = { ...DEFAULT_DESTINATION_LIMITS, stateBytes: { value: 4096, setting } };
    const named = await acquireLease(destination, "reports", ownerScope("reports", "archive"), {
      limits,
    });
    const again = await named.journal(paths, [""]).catch((error) => error);
    expect(again.message).toContain(
      'more than the 16773120 a journaled lease may have (the larger of 16 MiB and destinations[].max_state_size (4 KiB) of destination "archive"; raise it to journal more)',
    );
    await named.release();
  });

  it("of a publication whose state fits is written and read back: 17 000 long paths land", {
    timeout: 180_000,
  }, async () => {
    useBackendKind("local");
    const source = newBackend();
    const destination = newBackend();
    // A lease of about 17.4 MB, over the 16 MiB a lease had before its bound followed the
    // state's; the state (about 55 MB) is within the default 64 MiB.
    const long = longPathManifest(17_000, "a", new Date("2026-06-05T09:00:00Z"));
    const files = Object.fromEntries(long.files.map((file, index) => [file.path, `${index}\n`]));
    const manifest = await writeSourceBundle(source, "reports", files);
    const result = await publishTarget(publishTargetOptions(source, destination, manifest));
    expect(result.action).toBe("publish_new");
    expect(await leaseStatus(destination, "reports")).toBe("absent");
    expect(await everyFile(destination)).toHaveLength(17_001);
  });
});
