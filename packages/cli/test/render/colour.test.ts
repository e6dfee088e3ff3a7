import { describe, expect, it } from "vitest";
import { colourEnabled, paint } from "../../src/render/colour.js";

describe("colour", () => {
  it.each([
    ["a terminal", { noColorFlag: false, env: {}, isTTY: true }, true],
    ["a pipe", { noColorFlag: false, env: {}, isTTY: false }, false],
    ["--no-color", { noColorFlag: true, env: {}, isTTY: true }, false],
    ["NO_COLOR=1", { noColorFlag: false, env: { NO_COLOR: "1" }, isTTY: true }, false],
    ["NO_COLOR=0", { noColorFlag: false, env: { NO_COLOR: "0" }, isTTY: true }, false],
    ["an empty NO_COLOR", { noColorFlag: false, env: { NO_COLOR: "" }, isTTY: true }, true],
  ])("on %s is %s", (_name, choice, expected) => {
    expect(colourEnabled(choice)).toBe(expected);
  });

  it("paints only when enabled", () => {
    expect(paint("failed", "red", false)).toBe("failed");
    expect(paint("failed", "red", true)).toBe("\u001b[31mfailed\u001b[39m");
  });
});
