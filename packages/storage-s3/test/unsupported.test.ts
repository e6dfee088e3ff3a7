import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectStorageError } from "@distributor/storage/testing";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createS3Backend } from "../src/index.js";

// s3rver accepts If-None-Match and If-Match and ignores both, like some S3-compatible services:
// the backend must refuse to run the commit protocol on it instead of racing silently.
describe("s3 backend on a service that ignores conditional writes (s3rver)", () => {
  let directory = "";
  let server: S3rver | undefined;
  let endpoint = "";
  const bucket = "ignores-conditions";

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "distributor-s3rver-"));
    server = new S3rver({
      port: 0,
      address: "127.0.0.1",
      silent: true,
      directory,
      configureBuckets: [{ name: bucket }],
    });
    const { port } = await server.run();
    endpoint = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await server?.close();
    await rm(directory, { recursive: true, force: true });
  });

  const backend = (verifyConditionalWrites = true) =>
    createS3Backend({
      bucket,
      prefix: "site",
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
      verifyConditionalWrites,
      maxAttempts: 1,
    });

  it("fails no-clobber and compare-and-swap writes with unsupported, writing nothing", async () => {
    const s3 = backend();
    try {
      const error = await expectStorageError(
        s3.writeFile("b/.distributor.json", "{}\n"),
        "unsupported",
      );
      expect(error.message).toContain("ignores If-None-Match: * on an existing object");
      expect(error.message).toContain("docs/integrations/s3.md");
      await expectStorageError(s3.writeFile("b/x.txt", "x", { ifMatch: "abc" }), "unsupported");
      // The probe cleaned up after itself.
      expect(await s3.hasAny("")).toBe(false);
      // Writes that need no condition still work.
      await s3.writeFile("b/plain.txt", "plain", { overwrite: true });
      expect(Buffer.from(await s3.readFile("b/plain.txt")).toString()).toBe("plain");
    } finally {
      await s3.close();
    }
  });

  it("trusts the service when the check is turned off", async () => {
    const s3 = backend(false);
    try {
      await s3.writeFile("t/.distributor.json", "{}\n");
      expect((await s3.stat("t/.distributor.json")).kind).toBe("file");
    } finally {
      await s3.close();
    }
  });
});
