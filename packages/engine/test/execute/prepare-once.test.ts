import { joinPrefix, type StorageBackend } from "@distributor/storage";
import { afterAll, describe, expect, it } from "vitest";
import { publishTarget } from "../../src/index.js";
import {
  exists,
  newBackend,
  publishTargetOptions,
  readText,
  removeTempBackends,
  useBackendKind,
  writeSourceBundle,
} from "../../src/testing/fixtures.js";

afterAll(removeTempBackends);

/** Counts whole-file reads per path: rendering reads a Markdown source this way. */
function countingReads(backend: StorageBackend): { backend: StorageBackend; reads: string[] } {
  const reads: string[] = [];
  const counted = new Proxy(backend, {
    get(target, property, receiver) {
      if (property === "readFile") {
        return (path: string, options?: Parameters<StorageBackend["readFile"]>[1]) => {
          reads.push(path);
          return target.readFile(path, options);
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { backend: counted, reads };
}

describe("publishTarget", () => {
  it("plans a write again under the lease but prepares and renders its outputs once", async () => {
    useBackendKind("local");
    const files = { "report.md": "# Report\n\nBody.\n", "data/table.csv": "a,b\n1,2\n" };
    const plain = newBackend();
    const manifest = await writeSourceBundle(plain, "reports", files);
    const { backend: source, reads } = countingReads(plain);
    const destination = newBackend();
    const planned: string[][] = [];
    // No render cache: before, each planning attempt rendered the Markdown again.
    const plan = await publishTarget(
      publishTargetOptions(source, destination, manifest, {
        publish: { source: true, html: true },
        onPlan: (current) => planned.push(current.outputs.map((output) => output.path)),
      }),
    );
    expect(plan.action).toBe("publish_new");
    expect(planned).toEqual([["data/table.csv", "report.html", "report.md"]]);
    expect(reads.filter((path) => path === joinPrefix("reports", "report.md"))).toHaveLength(1);
    expect(await readText(destination, "reports/report.html")).toContain("<h1>Report</h1>");
    expect(await readText(destination, "reports/data/table.csv")).toBe("a,b\n1,2\n");
    expect(await exists(destination, "reports/.distributor.json")).toBe(true);
  });
});
