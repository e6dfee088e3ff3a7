import { compareLogicalPaths, createLocalBackend } from "@distributor/storage";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { BundleValidationError } from "../src/errors.js";
import { describeNameCollision, nameCollisions } from "../src/portable-names.js";
import { validateBundle } from "../src/validate.js";
import { TempDirs, writeBundle } from "./helpers.js";

const temp = new TempDirs();
afterEach(() => temp.cleanup());

const NFC = "caf\u00e9.txt";
const NFD = "cafe\u0301.txt";

describe("nameCollisions", () => {
  it("finds case-only twins and NFC/NFD twins, and nothing among portable names", () => {
    expect(nameCollisions(["A.html", "a.html", "b.html", NFC, NFD, "c/d.txt"])).toEqual([
      { kind: "case", paths: ["A.html", "a.html"] },
      { kind: "normalization", paths: [NFD, NFC] },
    ]);
    expect(nameCollisions(["a.html", "b.html", "a/b.html", "ab.html"])).toEqual([]);
  });

  it("finds the same collisions in byte order (a directory at a time) as in any other order", () => {
    const segment = fc.constantFrom(
      "a",
      "A",
      "b",
      "é",
      "e\u0301",
      "É",
      ".distributor.json",
      ".Distributor.JSON",
      "x.md",
    );
    const path = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => parts.join("/"));
    fc.assert(
      fc.property(fc.uniqueArray(path, { maxLength: 12 }), (paths) => {
        const sorted = [...paths].sort(compareLogicalPaths);
        // Reversed: not in order, so the general comparison runs.
        const general = nameCollisions([...sorted].reverse());
        const ordered = nameCollisions(sorted);
        // The same collisions in the same order (reports list them so).
        expect(ordered).toEqual(general);
      }),
      { numRuns: 3000 },
    );
  });

  it("lists a case collision before the reserved names of its first path, in byte order too", () => {
    const expected = nameCollisions([".Distributor.json", ".DISTRIBUTOR.json"]);
    expect(expected.map((c) => c.kind)).toEqual(["case", "reserved", "reserved"]);
    expect(nameCollisions([".DISTRIBUTOR.json", ".Distributor.json"])).toEqual(expected);
  });

  it("reports colliding directories once, not every file below them", () => {
    expect(nameCollisions(["Docs/a.txt", "docs/a.txt", "docs/b.txt"])).toEqual([
      { kind: "case", paths: ["Docs", "docs"] },
    ]);
  });

  it("finds names that are distributor's own state or lease file on such stores", () => {
    expect(
      nameCollisions([".Distributor.json", "docs/.DISTRIBUTOR.LEASE.JSON", ".distributor.jsonx"]),
    ).toEqual([
      { kind: "reserved", paths: [".Distributor.json"] },
      { kind: "reserved", paths: ["docs/.DISTRIBUTOR.LEASE.JSON"] },
    ]);
    expect(describeNameCollision({ kind: "reserved", paths: [".Distributor.json"] })).toBe(
      ".Distributor.json: is one name with distributor's own .distributor.json on case-insensitive or normalising stores",
    );
  });

  it("names code points where the names would look the same", () => {
    expect(describeNameCollision({ kind: "normalization", paths: [NFD, NFC] })).toBe(
      "cafe\\u{301}.txt, caf\\u{e9}.txt: names differ only by Unicode normalisation (NFC/NFD) and are one name on normalising stores",
    );
  });
});

describe("validateBundle portable names", () => {
  const files = {
    "A.html": "upper\n",
    "a.html": "lower\n",
    [NFC]: "composed\n",
    [NFD]: "decomposed\n",
  };

  it("warns by default and the bundle stays valid", async () => {
    const root = await temp.make();
    await writeBundle(root, "", files);
    const backend = createLocalBackend({ root });
    const validated = await validateBundle(backend, "");
    expect(validated.warnings.map((w) => [w.code, w.path])).toEqual([
      ["name_collision", "A.html"],
      ["name_collision", NFD],
    ]);
  });

  it("refuses under portableNames: refuse", async () => {
    const root = await temp.make();
    await writeBundle(root, "", files);
    const backend = createLocalBackend({ root });
    const error = await validateBundle(backend, "", { portableNames: "refuse" }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(BundleValidationError);
    expect((error as BundleValidationError).issues.map((i) => i.code)).toEqual([
      "name_collision",
      "name_collision",
    ]);
  });
});
