import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readFileChunks } from "../../read-chunks.js";
import { type ContractContext, expectKind, patternChunks } from "./context.js";

/**
 * Cancellation: an aborted operation rejects with the signal's own reason and leaves the store
 * as it was (no partial file, no temp name).
 */
export function describeCancellation(contract: ContractContext): void {
  const { backend, put, readText, files } = contract;
  describe("cancellation", () => {
    const aborted = (reason: unknown): AbortSignal => {
      const controller = new AbortController();
      controller.abort(reason);
      return controller.signal;
    };

    it("rejects every operation with the signal's reason when already aborted", async () => {
      await put({ "bundle/a.txt": "a", "bundle/.distributor.json": "{}" });
      const reason = new Error("stopped by the test");
      const signal = aborted(reason);
      const calls: (() => Promise<unknown>)[] = [
        () => backend().readFile("bundle/a.txt", { signal }),
        () => backend().openRead("bundle/a.txt", { signal }),
        () => readFileChunks(backend(), "bundle/a.txt", () => undefined, { signal }),
        () => backend().writeFile("new.txt", "data", { signal }),
        () => backend().writeFile("new.txt", Readable.from([Buffer.from("x")]), { signal }),
        () => backend().writeFile("bundle/a.txt", "replaced", { overwrite: true, signal }),
        () => backend().stat("bundle/a.txt", { signal }),
        () => backend().walk("", { recursive: true, limit: 10, signal }),
        () => backend().hasAny("bundle", { signal }),
        () => backend().deletePaths("bundle", ["a.txt"], { signal }),
        () => backend().deletePaths("bundle", ["a.txt", ".distributor.json"], { signal }),
        () => backend().deletePrefix("bundle", { signal }),
        () => backend().deletePrefix("", { signal }),
      ];
      for (const call of calls) await expect(call()).rejects.toBe(reason);
      expect(await files()).toEqual(["bundle/.distributor.json", "bundle/a.txt"]);
      expect(await readText("bundle/a.txt")).toBe("a");
    });

    it("rejects with an AbortError when the signal has no custom reason", async () => {
      const controller = new AbortController();
      controller.abort();
      const error = await backend()
        .writeFile("x.txt", "x", { signal: controller.signal })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect(error).toBe(controller.signal.reason);
      expect((error as Error).name).toBe("AbortError");
      await expectKind(backend().stat("x.txt"), "not_found");
    });

    it("stops readFileChunks aborted mid-file with the signal's reason", async () => {
      await backend().writeFile("chunks/big.bin", patternChunks(2 * 1024 * 1024));
      const controller = new AbortController();
      const reason = new Error("aborted mid-read");
      let calls = 0;
      const reading = readFileChunks(
        backend(),
        "chunks/big.bin",
        () => {
          calls++;
          controller.abort(reason);
          return undefined;
        },
        { signal: controller.signal },
      );
      await expect(reading).rejects.toBe(reason);
      // No chunk after the one during which the signal fired.
      expect(calls).toBe(1);
    });

    it("stops a streaming write aborted mid-stream and leaves no file", async () => {
      const controller = new AbortController();
      const reason = new Error("aborted mid-stream");
      let pulls = 0;
      const source = new Readable({
        read() {
          pulls++;
          if (pulls === 1) this.push(Buffer.from("first chunk"));
          // Second pull: the producer stalls and the caller gives up.
          else if (pulls === 2) controller.abort(reason);
        },
      });
      await expect(
        backend().writeFile("stream/aborted.txt", source, { signal: controller.signal }),
      ).rejects.toBe(reason);
      await expectKind(backend().stat("stream/aborted.txt"), "not_found");
      expect(await files()).toEqual([]);
    });

    it("keeps the old bytes when a replacing stream is aborted", async () => {
      await backend().writeFile("keep.txt", "old bytes");
      const controller = new AbortController();
      const reason = new Error("aborted mid-stream");
      async function* source(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("new ");
        controller.abort(reason);
        yield Buffer.from("bytes");
      }
      await expect(
        backend().writeFile("keep.txt", source(), { overwrite: true, signal: controller.signal }),
      ).rejects.toBe(reason);
      expect(await readText("keep.txt")).toBe("old bytes");
      expect(await files()).toEqual(["keep.txt"]);
    });
  });
}
