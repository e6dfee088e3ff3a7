import type { ComparisonOutcome } from "@distributor/state";
import { describe, expect, it } from "vitest";
import type { TransferPolicy } from "../../src/plan/action.js";
import { actionForComparison, DEFAULT_TRANSFER_POLICY } from "../../src/plan/action.js";

function decide(outcome: ComparisonOutcome, transfer: Partial<TransferPolicy> = {}, force = false) {
  return actionForComparison(
    { outcome, reason: "why" },
    { ...DEFAULT_TRANSFER_POLICY, ...transfer },
    force,
  ).action;
}

describe("actionForComparison", () => {
  it("maps every outcome under the default transfer policy", () => {
    expect(decide("destination_absent")).toBe("publish_new");
    expect(decide("destination_unmanaged")).toBe("fail_unmanaged");
    expect(decide("same_source")).toBe("skip_same");
    expect(decide("destination_older")).toBe("replace_older");
    expect(decide("destination_newer")).toBe("skip_destination_newer");
    for (const outcome of [
      "invalid_state",
      "identity_mismatch",
      "same_created_conflict",
      "different_source_conflict",
    ] as const) {
      expect(decide(outcome)).toBe("fail_conflict");
    }
  });

  it("applies the transfer policy", () => {
    expect(decide("same_source", { onDestinationSame: "fail" })).toBe("fail_conflict");
    expect(decide("destination_older", { onDestinationOlder: "skip" })).toBe(
      "skip_destination_older",
    );
    expect(decide("destination_older", { onDestinationOlder: "fail" })).toBe("fail_conflict");
    expect(decide("destination_newer", { onDestinationNewer: "fail" })).toBe("fail_conflict");
  });

  it("--force claims conflicts, unmanaged content and newer destinations but not a same source", () => {
    expect(decide("identity_mismatch", {}, true)).toBe("force_replace");
    expect(decide("destination_unmanaged", {}, true)).toBe("force_replace");
    expect(decide("destination_newer", {}, true)).toBe("force_replace");
    expect(decide("same_source", {}, true)).toBe("skip_same");
    expect(decide("destination_absent", {}, true)).toBe("publish_new");
    expect(decide("destination_older", {}, true)).toBe("replace_older");
    expect(decide("destination_older", { onDestinationOlder: "skip" }, true)).toBe(
      "skip_destination_older",
    );
  });

  it("explains policy-driven decisions", () => {
    const decision = actionForComparison(
      { outcome: "destination_newer", reason: "destination source is newer than source" },
      DEFAULT_TRANSFER_POLICY,
      false,
    );
    expect(decision.reason).toBe(
      "destination source is newer than source; replacing it requires --force",
    );
  });
});
