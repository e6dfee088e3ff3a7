import { describe, expect, it } from "vitest";
import {
  escapeName,
  isReservedName,
  isTempFileFor,
  nameProblem,
  reservedSegment,
  swapLockName,
  tempFileName,
} from "../src/names.js";

const bytes = (text: string) => Buffer.from(text, "latin1");

describe("stored names", () => {
  it("accepts UTF-8 names that are valid path segments", () => {
    expect(nameProblem(Buffer.from("résumé ✓ 😀.md"))).toBeUndefined();
    expect(escapeName(Buffer.from("résumé ✓ 😀.md"))).toBe("résumé ✓ 😀.md");
  });

  it("escapes bytes that are not UTF-8, control characters and backslashes", () => {
    expect(nameProblem(bytes("sub\xff"))).toBe("name is not valid UTF-8");
    expect(escapeName(bytes("sub\xff"))).toBe("sub\\xff");
    // A truncated multi-byte sequence and a lone continuation byte.
    expect(escapeName(Buffer.from([0x61, 0xe2, 0x9c, 0x62, 0x80]))).toBe("a\\xe2\\x9cb\\x80");
    expect(escapeName(Buffer.from("tab\there"))).toBe("tab\\x09here");
    expect(nameProblem(Buffer.from("tab\there"))).toBe("name contains a control character");
    expect(escapeName(Buffer.from("back\\slash"))).toBe("back\\\\slash");
    expect(nameProblem(Buffer.from("back\\slash"))).toBe("name contains a backslash");
  });

  it("reserves the state, lease and temp names, and nothing that merely looks alike", () => {
    expect(isReservedName(".distributor.json")).toBe(true);
    expect(isReservedName(".distributor.lease.json")).toBe(true);
    expect(isReservedName(tempFileName("report.md"))).toBe(true);
    expect(isTempFileFor(tempFileName(".distributor.lease.json"), ".distributor.lease.json")).toBe(
      true,
    );
    expect(isTempFileFor(tempFileName("report.md"), ".distributor.lease.json")).toBe(false);
    expect(isTempFileFor(swapLockName("a.json"), "a.json")).toBe(true);
    for (const name of [
      "distributor.json",
      ".distributor.json.bak",
      ".report.0123456789ab.tmp",
      ".distributor.yml",
    ]) {
      expect(isReservedName(name), name).toBe(false);
    }
    expect(reservedSegment("docs/.distributor.json/x")).toBe(".distributor.json");
    expect(reservedSegment("docs/index.html")).toBeUndefined();
  });
});
