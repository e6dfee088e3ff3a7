import { compareLogicalPaths, runSteps, type StorageEntry } from "@distributor/storage";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { BundleListing } from "../src/bundle-walk.js";
import type { Manifest } from "../src/manifest-types.js";
import { indexedWalkSteps, matchedWalkSteps, type WalkedFiles } from "../src/walked-files.js";

// The one-pass match of a walk and a manifest (both in byte order) against the general match
// through a map and a set, on random trees: the same sizes, directories, unlisted files and
// nested manifests; and the general match whenever either side is out of order.

const SHA = `sha256:${"0".repeat(64)}`;

function manifestOf(paths: readonly string[]): Manifest {
  return {
    id: "walked",
    created: new Date(0),
    files: paths.map((path, index) => ({ path, size: index, sha256: SHA })),
  } as unknown as Manifest;
}

function listingOf(
  bundlePath: string,
  files: readonly { path: string; size: number }[],
  directories: readonly string[],
): BundleListing {
  const under = (path: string) => (bundlePath === "" ? path : `${bundlePath}/${path}`);
  const entries: StorageEntry[] = [
    ...directories.map((path) => ({ path: under(path), kind: "directory" as const, size: 0 })),
    ...files.map(({ path, size }) => ({ path: under(path), kind: "file" as const, size })),
  ];
  entries.sort((a, b) => compareLogicalPaths(a.path, b.path));
  return { entries, issues: [] };
}

function summary(found: WalkedFiles, count: number) {
  return {
    sizes: Array.from({ length: count }, (_, index) => found.sizeAt(index)),
    directories: [...found.directories].sort(),
    unlisted: [...found.unlisted].sort(),
    nestedManifests: [...found.nestedManifests].sort(),
  };
}

const segment = fc.constantFrom(
  "a",
  "b",
  "B",
  "é",
  "\u{1F600}",
  "\uE000",
  "manifest.json",
  "x.txt",
);
const path = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("/"));

describe("matching a walk with its manifest", () => {
  it("in one pass gives what the general match gives, for paths in byte order", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(path, { maxLength: 14 }),
        fc.uniqueArray(path, { maxLength: 14 }),
        fc.uniqueArray(path, { maxLength: 6 }),
        fc.constantFrom("", "bundle"),
        (listedPaths, walkedPaths, directoryPaths, bundlePath) => {
          const listed = [...listedPaths].sort(compareLogicalPaths);
          const manifest = manifestOf(listed);
          // Directories among the files, some at a listed path (a listed file found a directory).
          const directories = directoryPaths.filter((p) => !walkedPaths.includes(p));
          const files = walkedPaths.map((p, index) => ({ path: p, size: 1000 + index }));
          const listing = listingOf(bundlePath, files, directories);
          const matched = runSteps(matchedWalkSteps(listing, bundlePath, manifest));
          const general = runSteps(indexedWalkSteps(listing, bundlePath, manifest));
          expect(matched).toBeDefined();
          expect(summary(matched as WalkedFiles, listed.length)).toEqual(
            summary(general, listed.length),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it("leaves a manifest or a walk out of byte order to the general match", () => {
    const listing = listingOf("", [{ path: "a", size: 1 }], []);
    // UTF-16 order puts the astral character first; byte order puts U+E000 first.
    const unordered = manifestOf(["\u{1F600}", "\uE000"]);
    expect(runSteps(matchedWalkSteps(listing, "", unordered))).toBeUndefined();
    expect(runSteps(matchedWalkSteps(listing, "", manifestOf(["a", "a"])))).toBeUndefined();
    const backwards: BundleListing = {
      entries: [
        { path: "b", kind: "file", size: 1 },
        { path: "a", kind: "file", size: 2 },
      ],
      issues: [],
    };
    expect(runSteps(matchedWalkSteps(backwards, "", manifestOf(["a", "b"])))).toBeUndefined();
    const general = runSteps(indexedWalkSteps(backwards, "", manifestOf(["a", "b", "c"])));
    expect(summary(general, 3).sizes).toEqual([2, 1, undefined]);
  });
});
