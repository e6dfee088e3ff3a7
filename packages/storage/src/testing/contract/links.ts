import { describe, expect, it } from "vitest";
import { type ContractContext, expectStorageError } from "./context.js";

/**
 * Links (`StorageBackend.links`), for backends whose capabilities say they have them: a symlink
 * read and switched in one step, a hard link sharing a file's bytes and version.
 */
export function describeLinks(contract: ContractContext): void {
  const { backend, capabilities } = contract;
  if (capabilities.links === undefined) {
    it("offers no links", () => {
      expect(backend().links).toBeUndefined();
    });
    return;
  }
  const links = () => {
    const operations = backend().links;
    if (operations === undefined) throw new Error("the backend offers no links");
    return operations;
  };

  describe("links", () => {
    it("reads nothing where no link is, and a link it switched", async () => {
      expect(await links().readLink("site/current")).toBeUndefined();
      await links().switchLink("site/current", "releases/a");
      expect(await links().readLink("site/current")).toBe("releases/a");
      await links().switchLink("site/current", "releases/b");
      expect(await links().readLink("site/current")).toBe("releases/b");
      // The switch leaves no temp name behind, and a walk shows the link without following it.
      const entries = await backend().walk("site", { recursive: true, limit: 10 });
      expect(entries.map((entry) => [entry.path, entry.kind])).toEqual([
        ["site/current", "symlink"],
      ]);
    });

    it("refuses to switch or read a file or a directory as a link", async () => {
      await contract.put({ "site/current": "a file", "site/dir/x": "x" });
      await expectStorageError(links().switchLink("site/current", "releases/a"), "conflict");
      await expectStorageError(links().readLink("site/current"), "conflict");
      await expectStorageError(links().switchLink("site/dir", "releases/a"), "conflict");
      expect(await contract.readText("site/current")).toBe("a file");
    });

    it("refuses a link text that is not a relative logical path", async () => {
      await expectStorageError(links().switchLink("site/current", "/etc"), "invalid_path");
      await expectStorageError(links().switchLink("site/current", "../up"), "invalid_path");
    });

    it("hard-links a file under a new name that shares its bytes and version", async () => {
      await contract.put({ "a/file": "bytes" });
      await links().hardLink("a/file", "b/deep/file");
      expect(await contract.readText("b/deep/file")).toBe("bytes");
      const [one, two] = await Promise.all([
        backend().stat("a/file"),
        backend().stat("b/deep/file"),
      ]);
      expect(two.version).toBe(one.version);
      // Replacing one name (a write is a new file renamed over it) leaves the other's bytes.
      await backend().writeFile("b/deep/file", "new", { overwrite: true });
      expect(await contract.readText("a/file")).toBe("bytes");
    });

    it("refuses a hard link onto an existing name or from a missing file", async () => {
      await contract.put({ "a/file": "bytes", "b/file": "other" });
      await expectStorageError(links().hardLink("a/file", "b/file"), "already_exists");
      await expectStorageError(links().hardLink("a/missing", "b/new"), "not_found");
      expect(await contract.readText("b/file")).toBe("other");
    });
  });
}
