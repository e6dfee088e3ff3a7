import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import {
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { isStorageError } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openS3Location } from "../src/index.js";
import {
  backendOn,
  createBucket,
  emptyBucket,
  listKeys,
  rawClient,
  type S3Server,
  s3Server,
  uniqueName,
} from "../src/testing/index.js";

const found = s3Server();
const MIB = 1024 * 1024;
const WRITE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A deterministic byte pattern of `size` bytes in 1 MiB chunks; `onChunk` may interrupt it. */
async function* pattern(
  size: number,
  onChunk?: (sent: number) => void,
): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < size; offset += MIB) {
    onChunk?.(offset);
    const length = Math.min(MIB, size - offset);
    yield Uint8Array.from({ length }, (_, index) => (offset + index) % 253);
  }
}

async function digestOf(chunks: AsyncIterable<Uint8Array>): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of chunks) hash.update(chunk);
  return `sha256:${hash.digest("hex")}`;
}

async function pendingUploads(server: S3Server, bucket: string): Promise<number> {
  const client = rawClient(server);
  try {
    const response = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    return response.Uploads?.length ?? 0;
  } finally {
    client.destroy();
  }
}

async function putRaw(server: S3Server, bucket: string, keys: readonly string[]): Promise<void> {
  const client = rawClient(server);
  try {
    for (let start = 0; start < keys.length; start += 64) {
      await Promise.all(
        keys
          .slice(start, start + 64)
          .map((Key) => client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: "x" }))),
      );
    }
  } finally {
    client.destroy();
  }
}

describe.skipIf(found === undefined)("s3 backend on Ceph RGW", () => {
  const server = found as S3Server;
  let bucket = "";
  beforeAll(async () => {
    bucket = await createBucket(server, "s3cases");
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
  });
  const fresh = (extra = {}) => {
    const prefix = uniqueName("p");
    return { prefix, backend: backendOn(server, bucket, prefix, extra) };
  };

  it("lists and deletes more than 1 000 keys, page by page and batch by batch", async () => {
    const { prefix, backend } = fresh();
    const keys = Array.from(
      { length: 2500 },
      (_, i) => `${prefix}/bulk/f${String(i).padStart(5, "0")}`,
    );
    await putRaw(server, bucket, keys);
    try {
      const entries = await backend.walk("bulk", { recursive: true, limit: 3000 });
      expect(entries).toHaveLength(2500);
      expect(entries.map((entry) => entry.path)).toEqual(
        keys.map((key) => key.slice(prefix.length + 1)),
      );
      await expectStorageError(backend.walk("bulk", { limit: 2499 }), "limit_exceeded");
      await backend.deletePrefix("bulk");
      expect(await listKeys(server, bucket, `${prefix}/`)).toEqual([]);
    } finally {
      await backend.close();
    }
  }, 120_000);

  it("uploads in the parts a configured location's multipart settings give", async () => {
    const prefix = uniqueName("p");
    const opened = await openS3Location(
      {
        bucket,
        prefix,
        region: server.region,
        endpoint: server.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyIdEnv: "K", secretAccessKeyEnv: "S" },
        multipart: { partSize: 6 * MIB, concurrency: 2 },
      },
      { env: { K: server.accessKeyId, S: server.secretAccessKey } },
    );
    try {
      // 13 MiB in 6 MiB parts: three parts (the default 8 MiB would make two).
      const big = 13 * MIB;
      const { version } = await opened.writeFile("big.bin", pattern(big), {
        size: big,
        sha256: await digestOf(pattern(big)),
      });
      expect(version).toMatch(/-3$/);
      // Up to one part is a single PUT: a bare MD5 as its ETag.
      const one = 6 * MIB;
      const single = await opened.writeFile("one.bin", pattern(one), {
        size: one,
        sha256: await digestOf(pattern(one)),
      });
      expect(single.version).not.toContain("-");
    } finally {
      await opened.close();
    }
  });

  it("uploads a 20 MiB object in parts and reads it back intact, with its sha256 stored", async () => {
    const { prefix, backend } = fresh();
    const size = 20 * MIB + 3;
    const sha256 = await digestOf(pattern(size));
    try {
      const { version } = await backend.writeFile("big/blob.bin", pattern(size), { size, sha256 });
      // A multipart ETag is `<md5 of part md5s>-<part count>`: proof that it went in parts.
      expect(version).toMatch(/-3$/);
      expect(await digestOf(await backend.openRead("big/blob.bin"))).toBe(sha256);
      const client = rawClient(server);
      const head = await client.send(
        new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}/big/blob.bin` }),
      );
      client.destroy();
      expect(head.ContentLength).toBe(size);
      expect(head.Metadata?.sha256).toBe(sha256);
      // The write's id, which a write whose answer was lost looks for.
      expect(head.Metadata?.["distributor-write"]).toMatch(WRITE_ID);
      expect(head.ContentType).toBe("application/octet-stream");
      // Without a size hint the head is buffered to the threshold, then the rest goes in parts.
      await backend.writeFile("big/unsized.bin", pattern(size), { overwrite: true });
      expect(await digestOf(await backend.openRead("big/unsized.bin"))).toBe(sha256);
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      await backend.close();
    }
  }, 120_000);

  it("stores the sha256 of a single-PUT object without being told", async () => {
    const { prefix, backend } = fresh();
    try {
      await backend.writeFile("small/page.html", "<p>hello</p>");
      const client = rawClient(server);
      const head = await client.send(
        new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}/small/page.html` }),
      );
      expect(head.Metadata?.sha256).toBe(
        `sha256:${createHash("sha256").update("<p>hello</p>").digest("hex")}`,
      );
      const id = head.Metadata?.["distributor-write"];
      expect(id).toMatch(WRITE_ID);
      // Every write has its own id, even of the same bytes.
      await backend.writeFile("small/page.html", "<p>hello</p>", { overwrite: true });
      const again = await client.send(
        new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}/small/page.html` }),
      );
      expect(again.Metadata?.["distributor-write"]).toMatch(WRITE_ID);
      expect(again.Metadata?.["distributor-write"]).not.toBe(id);
      expect(again.ContentType).toBe("text/html; charset=utf-8");
      client.destroy();
    } finally {
      await backend.close();
    }
  });

  it("refuses a payload whose digest differs from the promised sha256 and stores nothing", async () => {
    const { prefix, backend } = fresh();
    const wrong = `sha256:${"0".repeat(64)}`;
    try {
      await expectStorageError(
        backend.writeFile("d/small.txt", "abc", { sha256: wrong }),
        "unavailable",
      );
      const size = 12 * MIB;
      await expectStorageError(
        backend.writeFile("d/large.bin", pattern(size), { size, sha256: wrong }),
        "unavailable",
      );
      expect(await listKeys(server, bucket, `${prefix}/`)).toEqual([]);
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      await backend.close();
    }
  }, 60_000);

  it("aborts a multipart upload that is cancelled or whose source fails, leaving no parts", async () => {
    const { prefix, backend } = fresh();
    const size = 20 * MIB;
    try {
      const controller = new AbortController();
      const reason = new Error("stopped mid-upload");
      const aborted = backend.writeFile(
        "mp/cancelled.bin",
        pattern(size, (sent) => {
          if (sent >= 12 * MIB) controller.abort(reason);
        }),
        { size, signal: controller.signal },
      );
      await expect(aborted).rejects.toBe(reason);
      expect(await pendingUploads(server, bucket)).toBe(0);

      async function* failing(): AsyncGenerator<Uint8Array> {
        yield* pattern(17 * MIB);
        throw new Error("source broke");
      }
      await expectStorageError(backend.writeFile("mp/failed.bin", failing()), "unavailable");
      expect(await pendingUploads(server, bucket)).toBe(0);
      expect(await listKeys(server, bucket, `${prefix}/`)).toEqual([]);
    } finally {
      await backend.close();
    }
  }, 120_000);

  it("refuses a large no-clobber create over an existing object and keeps its bytes", async () => {
    const { backend } = fresh();
    try {
      await backend.writeFile("mp/existing.bin", "old");
      const size = 10 * MIB;
      await expectStorageError(
        backend.writeFile("mp/existing.bin", pattern(size), { size }),
        "already_exists",
      );
      expect(Buffer.from(await backend.readFile("mp/existing.bin")).toString()).toBe("old");
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      await backend.close();
    }
  }, 60_000);

  it("never lists, writes or deletes keys outside its prefix", async () => {
    const prefix = uniqueName("confined");
    const outside = [
      `${prefix}`,
      `${prefix}-sibling/a.txt`,
      `${prefix}.txt`,
      `other/${prefix}/b.txt`,
    ];
    await putRaw(server, bucket, [...outside, `${prefix}/inside.txt`]);
    const backend = backendOn(server, bucket, prefix);
    try {
      expect((await backend.walk("", { recursive: true, limit: 100 })).map((e) => e.path)).toEqual([
        "inside.txt",
      ]);
      await backend.writeFile("new/file.txt", "n");
      await backend.deletePaths("", ["inside.txt"]);
      await backend.deletePrefix("");
      expect(await backend.hasAny("")).toBe(false);
      const remaining = (await listKeys(server, bucket)).filter(
        (key) => key.startsWith(prefix) || key.startsWith("other/"),
      );
      expect(remaining.sort()).toEqual([...outside].sort());
    } finally {
      await backend.close();
      await emptyBucket(server, bucket, prefix);
      await emptyBucket(server, bucket, `other/${prefix}/`);
    }
  });

  it("reports keys that are no logical paths, and folder markers as directories", async () => {
    const prefix = uniqueName("odd");
    await putRaw(server, bucket, [
      `${prefix}/a//b.txt`,
      `${prefix}/dir/`,
      `${prefix}/x/../y.txt`,
      `${prefix}/ok.txt`,
    ]);
    const backend = backendOn(server, bucket, prefix);
    try {
      const entries = await backend.walk("", { recursive: true, limit: 100 });
      expect(entries.map((entry) => [entry.path, entry.kind, entry.nameProblem])).toEqual([
        ["a", "directory", undefined],
        ["a/\\x2fb.txt", "file", "name is empty"],
        ["dir", "directory", undefined],
        ["ok.txt", "file", undefined],
        ["x", "directory", undefined],
        ["x/\\x2e./y.txt", "file", 'name has a ".." segment'],
      ]);
      expect(await backend.stat("dir")).toMatchObject({ kind: "directory" });
    } finally {
      await backend.close();
      await emptyBucket(server, bucket, `${prefix}/`);
    }
  });

  it("reports wrong credentials as permission, naming bucket and key", async () => {
    for (const credentials of [
      { accessKeyId: "NOSUCHKEY", secretAccessKey: server.secretAccessKey },
      { accessKeyId: server.accessKeyId, secretAccessKey: "wrong-secret" },
    ]) {
      const backend = backendOn(server, bucket, "denied", { credentials, maxAttempts: 1 });
      try {
        const error = await expectStorageError(backend.stat("report.txt"), "permission");
        expect(error.message).toContain(`s3://${bucket}/denied/report.txt`);
        await expectStorageError(backend.readFile("report.txt"), "permission");
        await expectStorageError(backend.walk("", { limit: 10 }), "permission");
        await expectStorageError(
          backend.writeFile("report.txt", "x", { overwrite: true }),
          "permission",
        );
        await expectStorageError(backend.writeFile("report.txt", "x"), "permission");
        await expectStorageError(backend.deletePrefix("", {}), "permission");
      } finally {
        await backend.close();
      }
    }
  });

  it("names a missing bucket in every failure", async () => {
    const missing = uniqueName("missing");
    const backend = backendOn(server, missing, "p", { maxAttempts: 1 });
    try {
      const calls = [
        () => backend.stat("a.txt"),
        () => backend.readFile("a.txt"),
        () => backend.walk("", { limit: 10 }),
        () => backend.hasAny(""),
        () => backend.writeFile("a.txt", "x", { overwrite: true }),
        () => backend.writeFile("a.txt", "x"),
        () => backend.deletePrefix("", {}),
      ];
      for (const call of calls) {
        const error = await expectStorageError(call(), "unavailable");
        expect(error.message).toContain(`bucket "${missing}" does not exist`);
      }
    } finally {
      await backend.close();
    }
  });

  it("writes a ByteReader payload of the announced size, or of another size, intact", {
    timeout: 120_000,
  }, async () => {
    const { backend } = fresh();
    const bytes = (length: number) => Buffer.from(Uint8Array.from({ length }, (_, i) => i % 251));
    const readerOf = (payload: Buffer, failAfter?: number) => {
      let offset = 0;
      let reads = 0;
      return {
        async read(into: Uint8Array) {
          reads++;
          if (failAfter !== undefined && reads > failAfter) throw new Error("source disk gone");
          const length = Math.min(into.length, 70_000, payload.length - offset);
          into.set(payload.subarray(offset, offset + length));
          offset += length;
          return length;
        },
        close() {},
      };
    };
    try {
      for (const [name, length, announced] of [
        ["exact.bin", 300_000, 300_000],
        ["longer.bin", 300_000, 100_000],
        ["shorter.bin", 100_000, 300_000],
        ["empty.bin", 0, 0],
      ] as const) {
        const payload = bytes(length);
        await backend.writeFile(`r/${name}`, readerOf(payload), { size: announced });
        const stored = Buffer.from(await backend.readFile(`r/${name}`));
        expect(stored.equals(payload), name).toBe(true);
      }
      const error = await expectStorageError(
        backend.writeFile("r/failed.bin", readerOf(bytes(300_000), 2), { size: 300_000 }),
        "unavailable",
      );
      expect(error.message).toContain("source stream failed: source disk gone");
      await expectStorageError(backend.stat("r/failed.bin"), "not_found");
      // Above the threshold the parts are read straight from the reader.
      const large = bytes(20 * MIB + 3);
      const { version } = await backend.writeFile("r/large.bin", readerOf(large), {
        size: large.length,
      });
      expect(version).toMatch(/-3$/);
      expect(Buffer.from(await backend.readFile("r/large.bin")).equals(large)).toBe(true);
      const partial = await expectStorageError(
        backend.writeFile("r/large-failed.bin", readerOf(large, 200), { size: large.length }),
        "unavailable",
      );
      expect(partial.message).toContain("source stream failed: source disk gone");
      await expectStorageError(backend.stat("r/large-failed.bin"), "not_found");
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      await backend.close();
    }
  });

  it("signs a single PUT with the digest its reader verifies, which the service checks too", {
    timeout: 120_000,
  }, async () => {
    const { prefix, backend } = fresh();
    const bytes = (length: number, seed: number) =>
      Buffer.from(Uint8Array.from({ length }, (_, i) => (i + seed) % 251));
    const digest = (payload: Buffer) =>
      `sha256:${createHash("sha256").update(payload).digest("hex")}`;
    /** A reader claiming to verify `sha256` whatever it returns: broken, never a real one. */
    const vouching = (payload: Buffer, sha256: string) => {
      let offset = 0;
      return {
        verifiesSha256: sha256,
        async read(into: Uint8Array) {
          const length = Math.min(into.length, payload.length - offset);
          into.set(payload.subarray(offset, offset + length));
          offset += length;
          return length;
        },
        close() {},
      };
    };
    try {
      for (const [name, length] of [
        ["small.bin", 300_000],
        ["large.bin", 20 * MIB + 5],
      ] as const) {
        const payload = bytes(length, 1);
        const sha256 = digest(payload);
        await backend.writeFile(`v/${name}`, vouching(payload, sha256), { size: length, sha256 });
        expect(Buffer.from(await backend.readFile(`v/${name}`)).equals(payload), name).toBe(true);
        const client = rawClient(server);
        try {
          const head = await client.send(
            new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}/v/${name}` }),
          );
          expect(head.Metadata?.sha256, name).toBe(sha256);
        } finally {
          client.destroy();
        }
      }
      // Trusted for the digest, the reader's claim goes out as the payload's signed sha256: the
      // service compares it with the bytes and stores nothing.
      const claimed = digest(bytes(300_000, 1));
      const error = await expectStorageError(
        backend.writeFile("v/lying.bin", vouching(bytes(300_000, 2), claimed), {
          size: 300_000,
          sha256: claimed,
        }),
        "unavailable",
      );
      expect(error.message).toContain("XAmzContentSHA256Mismatch");
      await expectStorageError(backend.stat("v/lying.bin"), "not_found");
      // A reader verifying another digest than the caller's is hashed as any payload.
      const other = await expectStorageError(
        backend.writeFile("v/other.bin", vouching(bytes(300_000, 2), claimed), {
          size: 300_000,
          sha256: digest(bytes(300_000, 3)),
        }),
        "unavailable",
      );
      expect(other.message).toContain("expected sha256:");
    } finally {
      await backend.close();
    }
  });

  it("writes a state file above the multipart threshold in one conditional PUT", async () => {
    // A threshold of 5 MiB and a 6 MiB state: an output this large would go in parts.
    const { backend } = fresh({ multipartThreshold: 5 * MIB, partSize: 5 * MIB });
    const big = (fill: string) => `{"outputs": "${fill.repeat(6 * MIB)}"}\n`;
    try {
      const created = await backend.writeFile("b/.distributor.json", big("a"), { commit: true });
      // A multipart ETag ends in `-<part count>`; a single PUT's is a bare MD5.
      expect(created.version).toMatch(/^[0-9a-f]{32}$/);
      await expectStorageError(
        backend.writeFile("b/.distributor.json", big("b"), { commit: true }),
        "already_exists",
      );
      const replaced = await backend.writeFile("b/.distributor.json", big("c"), {
        ifMatch: created.version,
        commit: true,
      });
      expect(replaced.version).toMatch(/^[0-9a-f]{32}$/);
      // The service enforces the condition: a stale version is refused and the bytes stay.
      await expectStorageError(
        backend.writeFile("b/.distributor.json", big("d"), {
          ifMatch: created.version,
          commit: true,
        }),
        "conflict",
      );
      const stored = Buffer.from(await backend.readFile("b/.distributor.json")).toString("utf8");
      expect(stored).toBe(big("c"));
      // An ordinary output of the same size still goes in parts.
      const output = await backend.writeFile("b/out.json", big("e"));
      expect(output.version).toMatch(/-2$/);
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      await backend.close();
    }
  }, 120_000);

  it("lets exactly one of two backends racing a no-clobber create win", async () => {
    const prefix = uniqueName("race");
    for (let round = 0; round < 5; round++) {
      const backends = [backendOn(server, bucket, prefix), backendOn(server, bucket, prefix)];
      const outcomes = await Promise.allSettled(
        backends.map((backend, index) =>
          backend.writeFile(`round${round}/.distributor.lease.json`, `holder ${index}`),
        ),
      );
      const winners = outcomes.filter((outcome) => outcome.status === "fulfilled");
      expect(winners).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected")
          expect(isStorageError(outcome.reason, "already_exists")).toBe(true);
      }
      await Promise.all(backends.map((backend) => backend.close()));
    }
    await emptyBucket(server, bucket, `${prefix}/`);
  });

  it("works at the bucket root", async () => {
    const rootBucket = await createBucket(server, "root");
    const backend = backendOn(server, rootBucket, "");
    try {
      await backend.writeFile("a/b.txt", "b");
      await backend.writeFile(".distributor.json", "{}");
      expect(await backend.hasAny("")).toBe(true);
      expect((await backend.walk("", { recursive: true, limit: 10 })).map((e) => e.path)).toEqual([
        ".distributor.json",
        "a",
        "a/b.txt",
      ]);
      await backend.deletePrefix("", { keep: [".distributor.json"] });
      expect(await listKeys(server, rootBucket)).toEqual([".distributor.json"]);
    } finally {
      await backend.close();
      await emptyBucket(server, rootBucket, "", true);
    }
  });

  it("streams a read without buffering it whole", async () => {
    const { backend } = fresh();
    try {
      await backend.writeFile("s/data.bin", pattern(3 * MIB));
      const stream = await backend.openRead("s/data.bin");
      expect(stream).toBeInstanceOf(Readable);
      let chunks = 0;
      for await (const _ of stream) chunks++;
      expect(chunks).toBeGreaterThan(1);
    } finally {
      await backend.close();
    }
  });

  it("aborts the unfinished multipart uploads of exactly the paths given, page by page", {
    timeout: 120_000,
  }, async () => {
    const { prefix, backend } = fresh();
    const client = rawClient(server);
    const start = async (key: string) => {
      const created = await client.send(
        new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${prefix}/${key}` }),
      );
      await client.send(
        new UploadPartCommand({
          Bucket: bucket,
          Key: `${prefix}/${key}`,
          UploadId: created.UploadId,
          PartNumber: 1,
          Body: Buffer.alloc(1024, 1),
        }),
      );
    };
    const uploadsOf = async (key: string) => {
      const listed = await client.send(
        new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: `${prefix}/${key}` }),
      );
      return (listed.Uploads ?? []).filter((upload) => upload.Key === `${prefix}/${key}`).length;
    };
    try {
      await start("up/a.bin");
      await start("up/a.bin");
      // Keys that start with the path's key, and another file: not the path's uploads.
      await start("up/a.bin.sibling");
      await start("up/a.bin/inner");
      await start("up/b.bin");
      const abortUploads = backend.abortUploads?.bind(backend);
      if (abortUploads === undefined) throw new Error("the s3 backend has no abortUploads");
      expect(await abortUploads(["up/a.bin", "up/never-started.bin"])).toBe(2);
      expect(await uploadsOf("up/a.bin")).toBe(0);
      expect(await uploadsOf("up/a.bin.sibling")).toBe(1);
      expect(await uploadsOf("up/a.bin/inner")).toBe(1);
      expect(await uploadsOf("up/b.bin")).toBe(1);
      expect(await abortUploads(["up/a.bin"])).toBe(0);
      expect(await abortUploads(["up/a.bin.sibling", "up/a.bin/inner", "up/b.bin"])).toBe(3);
      expect(await pendingUploads(server, bucket)).toBe(0);
      // More uploads of one key than one listing page holds (1 000).
      const many = 1005;
      for (let begun = 0; begun < many; begun += 64) {
        await Promise.all(
          Array.from({ length: Math.min(64, many - begun) }, () =>
            client.send(
              new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${prefix}/up/many.bin` }),
            ),
          ),
        );
      }
      expect(await abortUploads(["up/many.bin"])).toBe(many);
      expect(await pendingUploads(server, bucket)).toBe(0);
    } finally {
      client.destroy();
      await backend.close();
    }
  });

  // Why fenced deletes compare the ETag with a HEAD before deleting (see `#deleteIfMatch`): this
  // gateway accepts If-Match on DeleteObject and deletes anyway. Should a later Ceph enforce it,
  // this fails, and the conditional DELETE alone becomes the fence.
  it("records that this Ceph RGW ignores If-Match on DeleteObject", async () => {
    const client = rawClient(server);
    const key = `${uniqueName("fact")}/object.txt`;
    try {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: "x" }));
      for (const etag of [
        "0123456789abcdef0123456789abcdef",
        '"0123456789abcdef0123456789abcdef"',
      ]) {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key, IfMatch: etag }));
        const gone = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })).then(
          () => false,
          () => true,
        );
        expect(gone, `DELETE with If-Match: ${etag}`).toBe(true);
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: "x" }));
      }
    } finally {
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      client.destroy();
    }
  });
});
