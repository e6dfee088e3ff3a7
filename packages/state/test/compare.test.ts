import { buildManifest, type Manifest } from "@distributor/bundle";
import {
  COMPARISON_OUTCOMES,
  type ComparisonOutcome,
  compare,
  compareSharedRootOwner,
  type DestinationStatus,
  ownerScope,
  parseSingleOwnerState,
  StateError,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import {
  fixture,
  HOUR,
  validManifest,
  validSharedRootState,
  validSingleOwnerState,
} from "./helpers.js";

const archive = ownerScope("reports", "archive");

function shifted(manifest: Manifest, ms: number): Manifest {
  return { ...manifest, created: new Date(manifest.created.getTime() + ms) };
}

function withId(manifest: Manifest, id: string, ms = 0): Manifest {
  return { ...shifted(manifest, ms), id };
}

function singleOwner(
  mutate?: (state: ReturnType<typeof validSingleOwnerState>) => void,
): DestinationStatus {
  const state = validSingleOwnerState();
  mutate?.(state);
  return { state, hasContents: true };
}

describe("compare (single owner)", () => {
  const source = validManifest();

  it("TestCompareOutcomes: every outcome", () => {
    const otherDigest = buildManifest({
      id: source.id,
      created: source.created,
      files: [{ path: "report.md", sha256: `sha256:${"c".repeat(64)}`, size: 3 }],
    });
    const cases: [string, Manifest, DestinationStatus, ComparisonOutcome, string][] = [
      [
        "absent",
        source,
        { hasContents: false },
        "destination_absent",
        "destination state is absent",
      ],
      [
        "unmanaged",
        source,
        { hasContents: true },
        "destination_unmanaged",
        "destination has content but no distributor state",
      ],
      [
        "state error",
        source,
        { stateError: new StateError("state outputs is required"), hasContents: true },
        "invalid_state",
        "state outputs is required",
      ],
      [
        "invalid in-memory state",
        source,
        singleOwner((s) => (s.outputs[0]!.size = -1)),
        "invalid_state",
        "state outputs[0].size must be non-negative",
      ],
      [
        "pipeline mismatch",
        source,
        singleOwner((s) => (s.pipelineId = "news")),
        "identity_mismatch",
        'pipeline id "news" does not match "reports"',
      ],
      [
        "destination mismatch",
        source,
        singleOwner((s) => (s.destinationId = "mirror")),
        "identity_mismatch",
        'destination id "mirror" does not match "archive"',
      ],
      [
        "same source",
        source,
        singleOwner(),
        "same_source",
        "destination source manifest matches source",
      ],
      [
        "destination older",
        shifted(source, HOUR),
        singleOwner(),
        "destination_older",
        "destination source is older than source",
      ],
      [
        "destination newer",
        shifted(source, -HOUR),
        singleOwner(),
        "destination_newer",
        "destination source is newer than source",
      ],
      [
        "same created, other digest",
        otherDigest,
        singleOwner(),
        "same_created_conflict",
        "destination source has same id and created time but different digest",
      ],
      [
        "different source id",
        withId(source, "reports.other"),
        singleOwner(),
        "different_source_conflict",
        "destination source id differs from source",
      ],
      [
        "same id, created and digest but other files",
        { ...source, files: [source.files[1]!, source.files[0]!] },
        singleOwner(),
        "invalid_state",
        "destination source differs from source without a supported comparison outcome",
      ],
    ];
    const seen = new Set<ComparisonOutcome>();
    for (const [name, manifest, status, outcome, reason] of cases) {
      expect(compare(manifest, archive, status), name).toEqual({ outcome, reason });
      seen.add(outcome);
    }
    expect([...seen].sort()).toEqual([...COMPARISON_OUTCOMES].sort());
  });

  it("a state error wins over a parsed state and over content", () => {
    const status = { ...singleOwner(), stateError: "boom" };
    expect(compare(source, archive, status)).toEqual({ outcome: "invalid_state", reason: "boom" });
  });

  it("shared-root state seen by a single-owner destination is a mismatch, not unmanaged", () => {
    const status: DestinationStatus = { state: validSharedRootState(), hasContents: true };
    expect(compare(source, archive, status).outcome).toBe("identity_mismatch");
  });

  it("a schema 1 state compares like schema 2", () => {
    const state = parseSingleOwnerState(fixture("valid-v1.json"));
    expect(compare(source, archive, { state, hasContents: true }).outcome).toBe("same_source");
  });

  it("path_mapping fixed compares a different source id by created", () => {
    const fixed = { pathMapping: "fixed" as const };
    expect(compare(withId(source, "reports.next", HOUR), archive, singleOwner(), fixed)).toEqual({
      outcome: "destination_older",
      reason: "fixed destination source is older than selected source",
    });
    expect(compare(withId(source, "reports.prev", -HOUR), archive, singleOwner(), fixed)).toEqual({
      outcome: "destination_newer",
      reason: "fixed destination source is newer than selected source",
    });
    expect(compare(withId(source, "reports.same"), archive, singleOwner(), fixed).outcome).toBe(
      "different_source_conflict",
    );
    // Without fixed mapping, another id is always a conflict.
    expect(compare(withId(source, "reports.next", HOUR), archive, singleOwner()).outcome).toBe(
      "different_source_conflict",
    );
    // Fixed mapping never overrides an identity mismatch.
    const other = singleOwner((s) => (s.pipelineId = "news"));
    expect(compare(withId(source, "reports.next", HOUR), archive, other, fixed).outcome).toBe(
      "identity_mismatch",
    );
  });
});

describe("compareSharedRootOwner", () => {
  const source = validManifest();
  const shared = (): DestinationStatus => ({ state: validSharedRootState(), hasContents: true });

  it("TestCompareSharedRootOwnerScopesCurrentOwner: only the current owner's record counts", () => {
    expect(compareSharedRootOwner(shifted(source, HOUR), archive, shared()).outcome).toBe(
      "destination_older",
    );
    expect(
      compareSharedRootOwner(shifted(source, HOUR), ownerScope("missing", "archive"), shared()),
    ).toEqual({
      outcome: "destination_absent",
      reason: "destination owner missing/archive is absent",
    });
    expect(compareSharedRootOwner(source, ownerScope("reports", "html"), shared()).outcome).toBe(
      "same_source",
    );
  });

  it("TestCompareSharedRootOwnerAcceptsMatchingSingleOwnerState: the migration case", () => {
    const state = validSingleOwnerState();
    const status: DestinationStatus = { state, hasContents: true };
    expect(
      compareSharedRootOwner(shifted(state.source.manifest, HOUR), archive, status).outcome,
    ).toBe("destination_older");
    expect(compareSharedRootOwner(state.source.manifest, archive, status).outcome).toBe(
      "same_source",
    );
    // Unrelated single-owner state is never taken over.
    expect(compareSharedRootOwner(source, ownerScope("reports", "html"), status)).toEqual({
      outcome: "identity_mismatch",
      reason: 'destination id "archive" does not match "html"',
    });
  });

  it("absent, unmanaged and unreadable destinations", () => {
    expect(compareSharedRootOwner(source, archive, { hasContents: false }).outcome).toBe(
      "destination_absent",
    );
    expect(compareSharedRootOwner(source, archive, { hasContents: true }).outcome).toBe(
      "destination_unmanaged",
    );
    expect(
      compareSharedRootOwner(source, archive, {
        stateError: new Error("bad json"),
        hasContents: true,
      }),
    ).toEqual({ outcome: "invalid_state", reason: "bad json" });
  });

  it("invalid in-memory shared-root state", () => {
    const state = validSharedRootState();
    state.owners.push(state.owners[0]!);
    expect(compareSharedRootOwner(source, archive, { state, hasContents: true })).toEqual({
      outcome: "invalid_state",
      reason: "state owners[2] duplicates owner reports/archive",
    });
  });

  it("every manifest outcome for the owner's record", () => {
    const status = shared();
    expect(compareSharedRootOwner(shifted(source, -HOUR), archive, status).outcome).toBe(
      "destination_newer",
    );
    expect(compareSharedRootOwner(withId(source, "reports.other"), archive, status).outcome).toBe(
      "different_source_conflict",
    );
    const otherDigest = buildManifest({
      id: source.id,
      created: source.created,
      files: [{ path: "x.md", sha256: `sha256:${"d".repeat(64)}`, size: 1 }],
    });
    expect(compareSharedRootOwner(otherDigest, archive, status).outcome).toBe(
      "same_created_conflict",
    );
  });

  it("path_mapping fixed compares a different source id by created, for shared roots and migrations", () => {
    const fixed = { pathMapping: "fixed" as const };
    expect(
      compareSharedRootOwner(withId(source, "reports.next", HOUR), archive, shared(), fixed)
        .outcome,
    ).toBe("destination_older");
    expect(
      compareSharedRootOwner(withId(source, "reports.prev", -HOUR), archive, shared(), fixed)
        .outcome,
    ).toBe("destination_newer");
    const single: DestinationStatus = { state: validSingleOwnerState(), hasContents: true };
    expect(
      compareSharedRootOwner(withId(source, "reports.next", HOUR), archive, single, fixed).outcome,
    ).toBe("destination_older");
  });
});
