import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFlushWatchedLocalBackend, type LocalFlush } from "../src/testing/index.js";

describe("a local backend that reports its flushes", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-flush-watch-"));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("reports each flush once it completed, before the write goes on", async () => {
    const flushes: string[] = [];
    const backend = createFlushWatchedLocalBackend({ root: dir }, (flush: LocalFlush) => {
      flushes.push(flush.kind === "file" ? "file" : `directory ${flush.path}`);
    });
    await backend.writeFile("docs/a.txt", "a");
    // The data is flushed before its name is in place; the name waits for the next commit.
    expect(flushes).toEqual(["file"]);
    await backend.writeFile("state.json", "{}", { commit: true });
    expect(flushes.slice(1)).toContain("directory docs");
    expect(flushes.at(-1)).toBe("directory ");
    expect(await readFile(join(dir, "docs/a.txt"), "utf8")).toBe("a");
    await backend.close();
  });

  it("reports no data flush without fsync, only a commit's", async () => {
    const kinds: string[] = [];
    const backend = createFlushWatchedLocalBackend({ root: dir, fsync: false }, (flush) => {
      kinds.push(flush.kind);
    });
    await backend.writeFile("a.txt", "a");
    expect(kinds).toEqual([]);
    await backend.writeFile("state.json", "{}", { commit: true });
    expect(kinds).toEqual(["file", "directory"]);
    await backend.close();
  });
});
