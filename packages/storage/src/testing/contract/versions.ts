import { describe, expect, it } from "vitest";
import { isStorageError } from "../../errors.js";
import { type ContractContext, expectKind } from "./context.js";

/**
 * Version tokens and the conditional writes the commit protocol stands on: one token per stored
 * version through write, stat, walk and readVersioned; a no-clobber create and a compare-and-swap
 * (`ifMatch`) that exactly one of many concurrent callers wins.
 */
export function describeVersions(contract: ContractContext): void {
  const { backend, readText, files, capabilities } = contract;
  describe("versions and conditional writes", () => {
    it("reports one version for a file through write, stat, walk and readVersioned", async () => {
      const { version } = await backend().writeFile("state/.distributor.json", "{}\n");
      expect(typeof version).toBe("string");
      expect(version).not.toBe("");
      expect((await backend().stat("state/.distributor.json")).version).toBe(version);
      const listed = await backend().walk("state", { limit: 10 });
      expect(listed.map((entry) => entry.version)).toEqual([version]);
      const read = await backend().readVersioned("state/.distributor.json");
      expect(read.version).toBe(version);
      expect(Buffer.from(read.bytes).toString("utf8")).toBe("{}\n");
    });

    it("gives every replacement a new version (with the same bytes too, unless content-derived)", async () => {
      const first = await backend().writeFile("v.txt", "same");
      const second = await backend().writeFile("v.txt", "same", { overwrite: true });
      const third = await backend().writeFile("v.txt", "other", { overwrite: true });
      expect(third.version).not.toBe(second.version);
      if (capabilities.contentDerivedVersions) expect(second.version).toBe(first.version);
      else expect(new Set([first.version, second.version, third.version]).size).toBe(3);
    });

    it("replaces a file with ifMatch on its current version", async () => {
      const { version } = await backend().writeFile("cas.txt", "one");
      const next = await backend().writeFile("cas.txt", "two", { ifMatch: version });
      expect(await readText("cas.txt")).toBe("two");
      expect(next.version).not.toBe(version);
      expect((await backend().stat("cas.txt")).version).toBe(next.version);
    });

    it("refuses ifMatch on a stale version with conflict and keeps the bytes", async () => {
      const { version } = await backend().writeFile("cas.txt", "one");
      await backend().writeFile("cas.txt", "two", { overwrite: true });
      const error = await expectKind(
        backend().writeFile("cas.txt", "three", { ifMatch: version }),
        "conflict",
      );
      expect(error.message).toContain("cas.txt");
      expect(await readText("cas.txt")).toBe("two");
      expect(await files()).toEqual(["cas.txt"]);
    });

    it("refuses ifMatch on a missing file with conflict and creates nothing", async () => {
      const { version } = await backend().writeFile("gone.txt", "x");
      await backend().deletePaths("", ["gone.txt"]);
      await expectKind(backend().writeFile("gone.txt", "y", { ifMatch: version }), "conflict");
      await expectKind(
        backend().writeFile("never/there.txt", "y", { ifMatch: version }),
        "conflict",
      );
      expect(await files()).toEqual([]);
    });

    it("lets exactly one of many concurrent no-clobber creates win", async () => {
      const attempts = Array.from({ length: 16 }, (_, index) =>
        backend().writeFile("lease/.distributor.lease.json", `holder ${index}`),
      );
      const outcomes = await Promise.allSettled(attempts);
      const winners = outcomes.flatMap((outcome, index) =>
        outcome.status === "fulfilled" ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          expect(isStorageError(outcome.reason, "already_exists"), String(outcome.reason)).toBe(
            true,
          );
        }
      }
      expect(await readText("lease/.distributor.lease.json")).toBe(`holder ${winners[0]}`);
      expect(await files()).toEqual(["lease/.distributor.lease.json"]);
    });

    it("lets exactly one of many concurrent compare-and-swaps of one version win", async () => {
      const { version } = await backend().writeFile("swap/.distributor.json", "start");
      const attempts = Array.from({ length: 12 }, (_, index) =>
        backend().writeFile("swap/.distributor.json", `swap ${index}`, { ifMatch: version }),
      );
      const outcomes = await Promise.allSettled(attempts);
      const winners = outcomes.flatMap((outcome, index) =>
        outcome.status === "fulfilled" ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          expect(isStorageError(outcome.reason, "conflict"), String(outcome.reason)).toBe(true);
        }
      }
      expect(await readText("swap/.distributor.json")).toBe(`swap ${winners[0]}`);
      expect(await files()).toEqual(["swap/.distributor.json"]);
    });

    it("records the content type given, or one inferred from the extension", async () => {
      await backend().writeFile("page.html", "<p>x</p>");
      await backend().writeFile("data.bin", "x", { contentType: "application/x-custom" });
      const page = await backend().stat("page.html");
      const data = await backend().stat("data.bin");
      // Stores without content types (a filesystem) report none; those that keep one keep it.
      if (page.contentType !== undefined) {
        expect(page.contentType).toBe("text/html; charset=utf-8");
        expect(data.contentType).toBe("application/x-custom");
      } else {
        expect(data.contentType).toBeUndefined();
      }
    });
  });
}
