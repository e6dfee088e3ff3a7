import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { configText, onlyProblem } from "./helpers.js";

const D = "pipelines[0].destinations[0]";
const MiB = 1024 ** 2;

/** The one destination of `configText(destination, pipeline)`, parsed. */
function destinationOf(destination: Record<string, unknown>, pipeline = {}) {
  const [parsed] = parseConfig(configText(destination, pipeline)).pipelines[0]?.destinations ?? [];
  if (parsed === undefined) throw new Error("no destination");
  return parsed;
}

describe("max_state_size", () => {
  it.each([
    ["512 MiB", 512 * MiB],
    ["128MiB", 128 * MiB],
    ["100MB", 100_000_000],
    ["1.5KiB", 1536],
  ])("reads %s as a size", (text, bytes) => {
    expect(destinationOf({ max_state_size: text }).maxStateSize).toBe(bytes);
  });

  it("defaults to 64 MiB while max_files is small", () => {
    expect(destinationOf({}).maxStateSize).toBe(64 * MiB);
    expect(destinationOf({}, { validation: { max_files: 65_536 } }).maxStateSize).toBe(64 * MiB);
  });

  it("defaults to 1 KiB per file max_files admits beyond that", () => {
    const validation = { max_files: 200_000 };
    expect(destinationOf({}, { validation }).maxStateSize).toBe(200_000 * 1024);
    // Set, the value is taken as it is.
    expect(destinationOf({ max_state_size: "8MiB" }, { validation }).maxStateSize).toBe(8 * MiB);
  });

  it("never defaults above a state file that can be read back", () => {
    const validation = { max_files: 1_000_000 };
    expect(destinationOf({}, { validation }).maxStateSize).toBe(512 * MiB);
  });

  it.each([
    [0, "max_state_size must be a size such as 512KiB, 64MiB or 10GB"],
    ["64", 'max_state_size must be a size such as 512KiB, 64MiB or 10GB (invalid size "64")'],
    ["0MiB", "max_state_size must be greater than zero"],
    [
      "1GiB",
      "max_state_size must be at most 512MiB, about the largest state file that can be read back",
    ],
  ])("rejects max_state_size %j naming the key", (value, message) => {
    expect(onlyProblem(configText({ max_state_size: value }))).toBe(`${D}.${message}`);
  });
});

describe("max_entries", () => {
  it("defaults to ten million and takes a whole number", () => {
    expect(destinationOf({}).maxEntries).toBe(10_000_000);
    expect(destinationOf({ max_entries: 50_000_000 }).maxEntries).toBe(50_000_000);
    expect(destinationOf({ max_entries: 1 }).maxEntries).toBe(1);
  });

  it.each([
    [0, "max_entries must be greater than zero"],
    [-5, "max_entries must be greater than zero"],
    [1.5, "max_entries must be a whole number"],
    ["many", "max_entries must be a whole number"],
  ])("rejects max_entries %j naming the key", (value, message) => {
    expect(onlyProblem(configText({ max_entries: value }))).toBe(`${D}.${message}`);
  });
});

describe("max_deletes", () => {
  const HINT =
    'max_deletes must be a whole number of outputs (such as 100) or a percentage of the managed outputs (such as "20%")';

  it.each([
    [100, 100],
    [0, 0],
    ["20%", { percent: 20 }],
    ["0%", { percent: 0 }],
    ["100%", { percent: 100 }],
    ["12.5%", { percent: 12.5 }],
  ])("reads %j", (value, limit) => {
    expect(destinationOf({ max_deletes: value }).maxDeletes).toEqual(limit);
  });

  it.each(["150%", "100.5%", "-5%"])("calls the percentage %j out of range, naming it", (value) => {
    expect(onlyProblem(configText({ max_deletes: value }))).toBe(
      `${D}.max_deletes must be a percentage from 0% to 100% of the managed outputs; "${value}" is out of range`,
    );
  });

  it.each([
    ["20", HINT],
    ["twenty%", HINT],
    [true, HINT],
    [-1, "max_deletes must be zero or more"],
    [2.5, "max_deletes must be a whole number"],
  ])("rejects %j naming the key", (value, message) => {
    expect(onlyProblem(configText({ max_deletes: value }))).toBe(`${D}.${message}`);
  });
});
