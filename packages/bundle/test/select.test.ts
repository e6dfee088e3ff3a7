import { describe, expect, it } from "vitest";
import { selectNewestBundle } from "../src/select.js";

function bundle(path: string, created: string) {
  return { path, manifest: { created: new Date(created) } };
}

describe("selectNewestBundle", () => {
  it("takes the newest manifest created, whatever the input order", () => {
    const bundles = [
      bundle("2026-06-03", "2026-06-03T08:00:00Z"),
      bundle("2026-06-05", "2026-06-05T08:00:00Z"),
      bundle("2026-06-04", "2026-06-04T08:00:00Z"),
    ];
    expect(selectNewestBundle(bundles)?.path).toBe("2026-06-05");
    expect(selectNewestBundle([...bundles].reverse())?.path).toBe("2026-06-05");
  });

  it("compares instants, not local times", () => {
    const bundles = [
      bundle("utc", "2026-06-04T10:00:00Z"),
      bundle("plus-two", "2026-06-04T11:00:00+02:00"),
    ];
    expect(selectNewestBundle(bundles)?.path).toBe("utc");
  });

  it("breaks ties by ascending path in byte order", () => {
    const created = "2026-06-04T11:55:00Z";
    const bundles = [
      bundle("b", created),
      bundle("a/z", created),
      bundle("a-z", created),
      bundle("\u{1d44e}", created),
      bundle("\uff41", created),
    ];
    expect(selectNewestBundle(bundles)?.path).toBe("a-z");
    expect(selectNewestBundle(bundles.slice(3))?.path).toBe("\uff41");
    expect(selectNewestBundle([bundle("x", created), bundle("", created)])?.path).toBe("");
  });

  it("prefers a newer bundle over a smaller path", () => {
    const bundles = [bundle("a", "2026-06-04T11:55:00Z"), bundle("b", "2026-06-04T11:55:00.001Z")];
    expect(selectNewestBundle(bundles)?.path).toBe("b");
  });

  it("returns undefined when there is nothing to select", () => {
    expect(selectNewestBundle([])).toBeUndefined();
  });

  it("returns the caller's object", () => {
    const only = { ...bundle("a", "2026-06-04T11:55:00Z"), extra: 1 };
    expect(selectNewestBundle([only])).toBe(only);
  });
});
