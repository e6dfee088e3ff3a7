import { describe, expect, it } from "vitest";
import { type ContractContext, expectKind } from "./context.js";

/**
 * Logical paths (docs/design/bundles.md): an invalid path or prefix fails with `invalid_path` before any IO.
 */
export function describeInvalidPaths(contract: ContractContext): void {
  const { backend, put, readText, tree } = contract;
  describe("invalid paths", () => {
    const invalid = [
      "../x",
      "/x",
      "a//b",
      "a/./b",
      "a/../b",
      "a\\b",
      "a/",
      "a\u0001b",
      "a\u007fb",
      "x".repeat(256),
    ];
    const invalidPaths = ["", ...invalid];

    it("accepts a 255-byte segment", async () => {
      const name = `${"é".repeat(127)}x`;
      expect(Buffer.byteLength(name)).toBe(255);
      await backend().writeFile(`dir/${name}`, "long");
      expect(await readText(`dir/${name}`)).toBe("long");
    });

    it("rejects invalid paths with invalid_path for every operation before any IO", async () => {
      const calls: [string, () => Promise<unknown>][] = [];
      for (const path of invalidPaths) {
        calls.push(
          ["read file", () => backend().readFile(path)],
          ["open reader", () => backend().openRead(path)],
          ["write file", () => backend().writeFile(path, "data")],
          ["write file", () => backend().writeFile(path, "data", { overwrite: true })],
          ["stat", () => backend().stat(path)],
          ["delete managed outputs", () => backend().deletePaths("", [path])],
          [
            "delete managed outputs",
            () => backend().deletePaths("b", ["ok", path, ".distributor.json"]),
          ],
        );
      }
      for (const prefix of invalid) {
        calls.push(
          ["walk", () => backend().walk(prefix, { recursive: true, limit: 10 })],
          ["has any", () => backend().hasAny(prefix)],
          ["delete prefix", () => backend().deletePrefix(prefix, { ignoreMissing: true })],
          [
            "delete managed outputs",
            () => backend().deletePaths(prefix, ["x"], { ignoreMissing: true }),
          ],
          ["delete managed outputs", () => backend().deletePaths(prefix, [".distributor.json"])],
        );
      }
      for (const [operation, call] of calls) {
        const error = await expectKind(call(), "invalid_path");
        expect(error.backend).toBe(backend().name);
        expect(error.operation).toBe(operation);
      }
      expect(await tree()).toEqual([]);
    });

    it("rejects invalid paths even when the target would otherwise exist", async () => {
      await put({ "a/b": "x" });
      await expectKind(backend().readFile("a//b"), "invalid_path");
      await expectKind(backend().readFile("a/./b"), "invalid_path");
      await expectKind(backend().deletePrefix("a/"), "invalid_path");
      expect(await readText("a/b")).toBe("x");
    });
  });
}
