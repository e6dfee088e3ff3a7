import {
  encodeDocument,
  encodeDocumentSteps,
  parseDocument,
  parseDocumentSteps,
  runSteps,
  STEP_RECORDS,
  type Steps,
  serializeSingleOwnerState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { validSingleOwnerState } from "./helpers.js";

/** The fixture's state with `count` outputs (copies of its first, at other paths). */
function bigStateText(count: number): string {
  const state = validSingleOwnerState();
  const [first] = state.outputs;
  if (first === undefined) throw new Error("fixture without outputs");
  state.outputs = Array.from({ length: count }, (_, index) => ({
    ...first,
    path: `pages/${String(index).padStart(6, "0")}.md`,
  }));
  return serializeSingleOwnerState(state);
}

/** Runs `steps` to the end, counting its pauses. */
function stepThrough<T>(steps: Steps<T>): { pauses: number; value: T } {
  let pauses = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return { pauses, value: next.value };
    pauses += 1;
  }
}

describe("parsing a state in steps", () => {
  it("gives what parseDocument gives, pausing while it reads and while it validates the records", () => {
    const count = 5 * STEP_RECORDS + 7;
    const text = bigStateText(count);
    const { pauses, value } = stepThrough(parseDocumentSteps(text));
    expect(value).toEqual(parseDocument(text));
    // Reading and validating each pause every STEP_RECORDS records, and between phases.
    expect(pauses).toBeGreaterThanOrEqual(2 * Math.floor(count / STEP_RECORDS));
  });

  it("fails where parseDocument fails, with the same message", () => {
    const document = JSON.parse(bigStateText(3 * STEP_RECORDS)) as {
      outputs: { sha256: string }[];
    };
    const broken = document.outputs[2500];
    if (broken === undefined) throw new Error("no record 2500");
    broken.sha256 = "sha256:not-hex";
    const text = JSON.stringify(document);
    let expected = "";
    try {
      parseDocument(text);
    } catch (error) {
      expected = (error as Error).message;
    }
    expect(expected).toContain("state outputs[2500].sha256");
    expect(() => runSteps(parseDocumentSteps(text))).toThrow(expected);
  });

  it("encodes what encodeDocument encodes, pausing while it validates and while it writes the records", () => {
    const document = parseDocument(bigStateText(4 * STEP_RECORDS + 3));
    const { pauses, value } = stepThrough(encodeDocumentSteps(document));
    expect(Buffer.from(value).equals(Buffer.from(encodeDocument(document)))).toBe(true);
    expect(pauses).toBeGreaterThanOrEqual(2 * 4);
  });
});
