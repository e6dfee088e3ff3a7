import { ownerScope } from "@distributor/state";
import { describe, expect, it } from "vitest";
import { DEFAULT_TRANSFER_POLICY } from "../../src/plan/action.js";
import { decideAction, decideSteps } from "../../src/plan/decide.js";
import { selectOutputs } from "../../src/plan/outputs.js";
import type { PublishTarget } from "../../src/plan/plan-types.js";
import { manifestFor, singleOwnerState } from "../../src/testing/fixtures.js";

const manifest = manifestFor({ "index.md": "# Home\n", "data/a.csv": "a\n" });
const target = (): PublishTarget => ({
  owner: ownerScope("reports", "archive"),
  manifest,
  bundlePath: "reports",
  stateMode: "single_owner",
  reconciliation: "replace",
  pathMapping: "preserve_relative",
  transfer: DEFAULT_TRANSFER_POLICY,
  force: false,
  planned: selectOutputs(manifest, { source: true, html: false }),
});

/** The decision the steps give, and how often they paused on the way. */
function stepped(status: Parameters<typeof decideSteps>[1]) {
  const steps = decideSteps(target(), status);
  let pauses = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return { decision: next.value, pauses };
    pauses += 1;
  }
}

describe("decideSteps", () => {
  it("pauses between the comparison, the completeness check and the metadata check of a skip", () => {
    const status = { state: singleOwnerState(manifest), hasContents: true };
    const { decision, pauses } = stepped(status);
    expect(decision).toEqual(decideAction(target(), status));
    expect(decision.action).toBe("skip_same");
    expect(pauses).toBe(2);
  });

  it("decides as decideAction does where the state is incomplete or absent", () => {
    const state = singleOwnerState(manifest);
    const incomplete = { state: { ...state, outputs: state.outputs.slice(1) }, hasContents: true };
    expect(stepped(incomplete).decision).toEqual(decideAction(target(), incomplete));
    expect(stepped(incomplete).decision.action).toBe("complete");
    const absent = { hasContents: false };
    expect(stepped(absent).decision).toEqual(decideAction(target(), absent));
    expect(stepped(absent).decision.action).toBe("publish_new");
  });
});
