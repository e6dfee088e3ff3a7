import { describe, expect, it } from "vitest";
import { type ContractContext, expectKind } from "./context.js";

/**
 * Object metadata (`cacheControl`, `contentDisposition`, `contentEncoding`): a store that keeps
 * it (`storesObjectMetadata`, as S3 does) stores what a write gives and reports it through
 * `stat`; one that cannot (a filesystem) refuses a write that asks for it, before any IO.
 */
export function describeObjectMetadata(contract: ContractContext): void {
  const { backend } = contract;
  describe("object metadata", () => {
    it("stores object metadata where it can, and refuses it before any IO where it cannot", async () => {
      const headers = {
        cacheControl: "public, max-age=60",
        contentDisposition: "attachment",
        contentEncoding: "gzip",
      };
      if (backend().storesObjectMetadata) {
        await backend().writeFile("headers.txt", "x", headers);
        const entry = await backend().stat("headers.txt");
        expect({
          cacheControl: entry.cacheControl,
          contentDisposition: entry.contentDisposition,
          contentEncoding: entry.contentEncoding,
        }).toEqual(headers);
        // A later write without them stores none.
        await backend().writeFile("headers.txt", "y", { overwrite: true });
        const plain = await backend().stat("headers.txt");
        expect([plain.cacheControl, plain.contentDisposition, plain.contentEncoding]).toEqual([
          undefined,
          undefined,
          undefined,
        ]);
      } else {
        await expectKind(
          backend().writeFile("headers.txt", "x", { cacheControl: "no-cache" }),
          "unsupported",
        );
        await expectKind(backend().stat("headers.txt"), "not_found");
      }
    });
  });
}
