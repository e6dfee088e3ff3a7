import { describe, expect, it } from "vitest";
import { UsageError } from "../src/errors.js";
import {
  booleanFlag,
  checkBooleanAssignments,
  joinDashValues,
  optionalString,
  outputFormat,
  requiredString,
  stringList,
} from "../src/flags.js";

const booleans = new Set(["dry-run", "force"]);

describe("outputFormat", () => {
  it.each([
    [undefined, "text"],
    ["text", "text"],
    ["json", "json"],
  ])("reads %j as %s", (format, expected) => {
    expect(outputFormat({ format })).toBe(expected);
  });

  it.each(["xml", "", "JSON"])("refuses %j", (format) => {
    expect(() => outputFormat({ format })).toThrow(
      new UsageError(`format must be text or json, not ${JSON.stringify(format)}`),
    );
  });

  it("refuses a repeated --format", () => {
    expect(() => outputFormat({ format: ["text", "json"] })).toThrow(
      "--format may be given only once",
    );
  });
});

describe("string flags", () => {
  it("reads a value, or nothing", () => {
    expect(optionalString({ config: "a.yml" }, "config")).toBe("a.yml");
    expect(optionalString({}, "config")).toBeUndefined();
  });

  it("refuses empty and repeated values", () => {
    expect(() => optionalString({ config: "" }, "config")).toThrow("--config requires a value");
    expect(() => optionalString({ config: ["a", "b"] }, "config")).toThrow(
      "--config may be given only once",
    );
  });

  it("names the command that needs a flag", () => {
    expect(() => requiredString({}, "pipeline", "prune")).toThrow(
      new UsageError("prune requires --pipeline"),
    );
  });

  it("collects repeated list flags in order", () => {
    expect(stringList({ pipeline: ["b", "a"] }, "pipeline")).toEqual(["b", "a"]);
    expect(stringList({}, "pipeline")).toEqual([]);
    expect(() => stringList({ pipeline: [] }, "pipeline")).toThrow("--pipeline requires a value");
  });
});

describe("switches", () => {
  it("lets the last repetition win", () => {
    expect(booleanFlag({ "dry-run": [true, false] }, "dry-run")).toBe(false);
    expect(booleanFlag({ "dry-run": true }, "dry-run")).toBe(true);
    expect(booleanFlag({}, "dry-run")).toBe(false);
  });

  it("accepts =true and =false but nothing else", () => {
    expect(() =>
      checkBooleanAssignments(["--dry-run=true", "--force=false"], booleans),
    ).not.toThrow();
    expect(() => checkBooleanAssignments(["--dry-run=yes"], booleans)).toThrow(
      '--dry-run takes no value, got "--dry-run=yes"',
    );
  });

  it("ignores values of other flags and everything after --", () => {
    expect(() =>
      checkBooleanAssignments(["--config=x", "--", "--force=maybe"], booleans),
    ).not.toThrow();
  });
});

describe("joinDashValues", () => {
  it("joins a flag with a value that starts with a dash and a digit", () => {
    expect(joinDashValues(["run", "--lock-timeout", "-5s", "--dry-run"], booleans)).toEqual([
      "run",
      "--lock-timeout=-5s",
      "--dry-run",
    ]);
    expect(joinDashValues(["--lock-timeout", "-1h30m"], booleans)).toEqual([
      "--lock-timeout=-1h30m",
    ]);
  });

  it("leaves switches, flags that follow, joined values and everything after -- alone", () => {
    const untouched = [
      ["run", "--dry-run", "-5"],
      ["run", "--pipeline", "--dry-run"],
      ["run", "--lock-timeout=-5s"],
      ["run", "--lock-timeout", "-x"],
      ["run", "--", "--lock-timeout", "-5s"],
      ["run", "--lock-timeout"],
    ];
    for (const argv of untouched) expect(joinDashValues(argv, booleans)).toEqual(argv);
  });
});
