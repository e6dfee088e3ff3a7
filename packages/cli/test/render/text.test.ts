import { describe, expect, it } from "vitest";
import { formatValue, summaryLine } from "../../src/render/text.js";

describe("summaryLine", () => {
  it("joins key=value fields after a label", () => {
    expect(
      summaryLine("Prune", [
        ["pipeline", "reports"],
        ["planned", 2],
        ["dry_run", true],
      ]),
    ).toBe("Prune: pipeline=reports planned=2 dry_run=true");
  });

  it("omits the label when there is none", () => {
    expect(summaryLine(undefined, [["action", "publish_new"]])).toBe("action=publish_new");
  });
});

describe("formatValue", () => {
  it.each([
    ["reports/2026", "reports/2026"],
    ["sha256:abc", "sha256:abc"],
    ["https://example.com/a?b=c", '"https://example.com/a?b=c"'],
    ["two words", '"two words"'],
    ['say "hi"', '"say \\"hi\\""'],
    ["", '""'],
    ["tab\there", '"tab\\there"'],
  ])("writes %j as %s", (value, written) => {
    expect(formatValue(value)).toBe(written);
  });

  it("writes absent values as -", () => {
    expect(formatValue(null)).toBe("-");
    expect(formatValue(undefined)).toBe("-");
  });
});
