import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryBackend, isStorageError, type StorageBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  bundlePrefix,
  findDestination,
  findPipeline,
} from "../../src/backends/configured-location.js";
import { openBackend, withBackend } from "../../src/backends/registry.js";
import { parseConfig } from "../../src/config/index.js";
import { WorkflowError } from "../../src/errors.js";

let root: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-shared-"));
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("openBackend", () => {
  it("opens local locations without a registry", async () => {
    const backend = await openBackend(
      undefined,
      { backend: "local", path: root },
      { role: "source" },
    );

    expect(backend.name).toBe("local");
    expect(backend.location).toBe(`local:${root}`);
  });

  it("prefers the caller's factory over the default", async () => {
    const memory = createMemoryBackend();

    const backend = await openBackend(
      { local: async () => memory },
      { backend: "local", path: root },
      { role: "destination" },
    );

    expect(backend).toBe(memory);
  });

  it("names the backend nobody registered", async () => {
    const failure = await openBackend(
      {},
      { backend: "s3", bucket: "b-1", prefix: "", region: "us-east-1", forcePathStyle: false },
      { role: "destination" },
    ).catch((error: unknown) => error);

    expect(isStorageError(failure, "unsupported")).toBe(true);
    expect((failure as Error).message).toBe(
      "open backend s3:b-1: no s3 backend is registered (available: local)",
    );
  });
});

describe("withBackend", () => {
  function closingBackend(closed: string[]): StorageBackend {
    const backend = createMemoryBackend();
    return Object.assign(Object.create(backend) as StorageBackend, {
      close: async () => {
        closed.push("closed");
      },
    });
  }

  it("closes the backend after the work", async () => {
    const closed: string[] = [];

    await expect(withBackend(closingBackend(closed), async () => "done")).resolves.toBe("done");
    expect(closed).toEqual(["closed"]);
  });

  it("closes the backend when the work fails, keeping the failure", async () => {
    const closed: string[] = [];

    await expect(
      withBackend(closingBackend(closed), async () => {
        throw new Error("work failed");
      }),
    ).rejects.toThrow("work failed");
    expect(closed).toEqual(["closed"]);
  });
});

describe("bundlePrefix", () => {
  it.each([
    ["", ""],
    [".", ""],
    ["./", ""],
    ["reports", "reports"],
    ["reports/2026/", "reports/2026"],
  ])("reads %j as %j", (text, prefix) => {
    expect(bundlePrefix(text)).toBe(prefix);
  });

  it.each(["../x", "/abs", "a//b", "a/./b", "a\\b"])("refuses %j", (text) => {
    expect(() => bundlePrefix(text)).toThrow(WorkflowError);
  });
});

describe("selection", () => {
  const config = () =>
    parseConfig(
      `pipelines:
  - id: reports
    source: {backend: local, path: ${root}}
    destinations:
      - {id: archive, backend: local, path: ${join(root, "out")}}
`,
      { cwd: root },
    );

  it("finds configured pipelines and destinations", () => {
    const pipeline = findPipeline(config(), "reports");
    expect(findDestination(pipeline, "archive").id).toBe("archive");
  });

  it("words unknown ids as operators grep for them", () => {
    expect(() => findPipeline(config(), "other")).toThrow('pipeline "other" not found');
    const pipeline = findPipeline(config(), "reports");
    expect(() => findDestination(pipeline, "site")).toThrow(
      "pipeline reports destination site not found",
    );
  });
});
