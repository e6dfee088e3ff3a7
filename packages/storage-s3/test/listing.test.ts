import { createServer, type IncomingMessage, type Server } from "node:http";
import { expectStorageError } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createS3Backend } from "../src/index.js";

/**
 * A fake service whose every listing is one page that says more keys follow (`IsTruncated`)
 * but gives no `NextContinuationToken`: a broken or hostile S3-compatible service.
 */
function truncatedListing(prefix: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>broken</Name><Prefix>${prefix}</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>${prefix}a.txt</Key><Size>1</Size><ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag></Contents>
</ListBucketResult>`;
}

describe("s3 backend on a service whose listing is truncated without a continuation token", () => {
  let server: Server;
  let endpoint = "";
  const seen: string[] = [];

  beforeAll(async () => {
    server = createServer((request: IncomingMessage, response) => {
      const url = new URL(request.url ?? "/", "http://localhost");
      seen.push(`${request.method} ${url.pathname}${url.search}`);
      request.resume();
      if (request.method === "GET" && url.searchParams.get("list-type") === "2") {
        response.writeHead(200, { "content-type": "application/xml" });
        response.end(truncatedListing(url.searchParams.get("prefix") ?? ""));
        return;
      }
      if (request.method === "HEAD") {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(500, { "content-type": "application/xml" });
      response.end("<Error><Code>InternalError</Code><Message>not in this fake</Message></Error>");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (address === null || typeof address !== "object") throw new Error("no port");
    endpoint = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const backend = () =>
    createS3Backend({
      bucket: "broken",
      prefix: "site",
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: "KEY", secretAccessKey: "SECRET" },
      maxAttempts: 1,
    });

  it("fails a walk with unavailable instead of ending it as if complete", async () => {
    const s3 = backend();
    try {
      for (const recursive of [true, false]) {
        const error = await expectStorageError(
          s3.walk("", { recursive, limit: 100 }),
          "unavailable",
        );
        expect(error.message).toContain("walk s3:.: ");
        expect(error.message).toContain("listing page truncated without a continuation token");
      }
    } finally {
      await s3.close();
    }
  });

  it("fails a prefix delete before it deletes anything it has not seen the end of", async () => {
    const s3 = backend();
    seen.length = 0;
    try {
      const error = await expectStorageError(s3.deletePrefix("docs"), "unavailable");
      expect(error.message).toContain("listing page truncated without a continuation token");
      // The page's one key was pending in the first batch: no DeleteObjects went out.
      expect(seen.filter((line) => line.startsWith("POST"))).toEqual([]);
    } finally {
      await s3.close();
    }
  });

  it("still answers hasAny from the first page, which is all it needs", async () => {
    const s3 = backend();
    try {
      expect(await s3.hasAny("")).toBe(true);
    } finally {
      await s3.close();
    }
  });
});
