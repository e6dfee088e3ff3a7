import {
  ownerScope,
  type PruneCandidate,
  planPrune,
  pruneCandidatesForDocument,
  StateError,
  sharedRootPruneCandidates,
  singleOwnerPruneCandidates,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { HOUR, validSharedRootState, validSingleOwnerState } from "./helpers.js";

const now = new Date("2026-06-08T12:00:00Z");
const ago = (hours: number): Date => new Date(now.getTime() - hours * HOUR);
const paths = (candidates: PruneCandidate[]): string => candidates.map((c) => c.path).join(",");

describe("planPrune", () => {
  it("TestPlanPruneOlderThan: prunes outputs updated before now - older_than", () => {
    const plan = planPrune(
      [
        { path: "old.txt", updatedAt: ago(72) },
        { path: "fresh.txt", updatedAt: ago(24) },
      ],
      { now, olderThanMs: 48 * HOUR },
    );
    expect(paths(plan.pruned)).toBe("old.txt");
    expect(paths(plan.preserved)).toBe("fresh.txt");
  });

  it("an output exactly at the cutoff is preserved", () => {
    const plan = planPrune([{ path: "edge.txt", updatedAt: ago(48) }], {
      now,
      olderThanMs: 48 * HOUR,
    });
    expect(paths(plan.pruned)).toBe("");
    expect(paths(plan.preserved)).toBe("edge.txt");
  });

  it("TestPlanPruneKeepLatest: keeps the newest, prunes the rest", () => {
    const plan = planPrune(
      [
        { path: "old.txt", updatedAt: ago(72) },
        { path: "new.txt", updatedAt: ago(1) },
        { path: "middle.txt", updatedAt: ago(24) },
      ],
      { keepLatest: 2 },
    );
    expect(paths(plan.pruned)).toBe("old.txt");
    expect(paths(plan.preserved)).toBe("new.txt,middle.txt");
  });

  it("TestPlanPruneCombinedPolicyPreservesLatestBeforeAgeCheck", () => {
    const plan = planPrune(
      [
        { path: "oldest.txt", updatedAt: ago(96) },
        { path: "old.txt", updatedAt: ago(72) },
        { path: "fresh.txt", updatedAt: ago(24) },
      ],
      { now, olderThanMs: 48 * HOUR, keepLatest: 1 },
    );
    expect(paths(plan.pruned)).toBe("oldest.txt,old.txt");
    expect(paths(plan.preserved)).toBe("fresh.txt");

    // keep_latest protects old outputs the age check alone would prune.
    const kept = planPrune(
      [
        { path: "oldest.txt", updatedAt: ago(96) },
        { path: "old.txt", updatedAt: ago(72) },
      ],
      { now, olderThanMs: 48 * HOUR, keepLatest: 1 },
    );
    expect(paths(kept.pruned)).toBe("oldest.txt");
    expect(paths(kept.preserved)).toBe("old.txt");
  });

  it("TestPlanPruneDeterministicTieBreaking: equal times order by path", () => {
    const plan = planPrune(
      [
        { path: "b.txt", updatedAt: now },
        { path: "a.txt", updatedAt: now },
        { path: "c.txt", updatedAt: ago(1) },
      ],
      { keepLatest: 1 },
    );
    expect(paths(plan.preserved)).toBe("a.txt");
    expect(paths(plan.pruned)).toBe("c.txt,b.txt");
  });

  it("ties break in byte order, not UTF-16 order", () => {
    // U+FF21 sorts before U+1F600 in UTF-8, after it in UTF-16 code units.
    const plan = planPrune(
      [
        { path: "\u{1F600}.txt", updatedAt: now },
        { path: "\uFF21.txt", updatedAt: now },
      ],
      { keepLatest: 0 },
    );
    expect(paths(plan.pruned)).toBe("\uFF21.txt,\u{1F600}.txt");
  });

  it("with no policy nothing is pruned and everything is preserved newest first", () => {
    const plan = planPrune([
      { path: "a", updatedAt: ago(5) },
      { path: "b", updatedAt: ago(1) },
    ]);
    expect(paths(plan.pruned)).toBe("");
    expect(paths(plan.preserved)).toBe("b,a");
  });

  it("keep_latest beyond the count keeps everything; negative keeps none", () => {
    const candidates = [
      { path: "a", updatedAt: ago(5) },
      { path: "b", updatedAt: ago(1) },
    ];
    expect(paths(planPrune(candidates, { keepLatest: 10 }).preserved)).toBe("b,a");
    expect(paths(planPrune(candidates, { keepLatest: -1 }).pruned)).toBe("a,b");
  });

  it("does not change its input", () => {
    const candidates = [
      { path: "b", updatedAt: ago(1) },
      { path: "a", updatedAt: ago(5) },
    ];
    const before = structuredClone(candidates);
    planPrune(candidates, { now, olderThanMs: HOUR, keepLatest: 1 });
    expect(candidates).toEqual(before);
  });

  it("needs a reference time for older_than and refuses nonsense durations", () => {
    expect(() => planPrune([], { olderThanMs: HOUR })).toThrow(
      "prune now is required when older_than is set",
    );
    expect(() => planPrune([], { now, olderThanMs: Number.NaN })).toThrow(StateError);
    expect(() => planPrune([], { keepLatest: Number.NaN })).toThrow(StateError);
  });
});

describe("prune candidates", () => {
  it("single-owner state offers every output with its updated_at", () => {
    const state = validSingleOwnerState();
    expect(singleOwnerPruneCandidates(state)).toEqual([
      { path: "report.md", updatedAt: new Date("2026-05-30T11:12:00Z") },
      { path: "report.html", updatedAt: new Date("2026-05-30T11:12:00Z") },
    ]);
  });

  it("TestSharedRootPruneCandidatesPreserveOtherOwners: only the current owner's outputs", () => {
    const scope = ownerScope("reports", "archive");
    const candidates = sharedRootPruneCandidates(validSharedRootState(), scope);
    expect(paths(candidates)).toBe("report.md");
    expect(candidates[0]?.owner).toEqual(scope);
  });

  it("pruneCandidatesForDocument refuses another owner's single-owner state", () => {
    const state = validSingleOwnerState();
    expect(() => pruneCandidatesForDocument(state, ownerScope("news", "archive"))).toThrow(
      "state owner is reports/archive, not news/archive",
    );
    expect(paths(pruneCandidatesForDocument(state, ownerScope("reports", "archive")))).toBe(
      "report.md,report.html",
    );
    expect(
      paths(pruneCandidatesForDocument(validSharedRootState(), ownerScope("reports", "html"))),
    ).toBe("report.html");
  });
});
