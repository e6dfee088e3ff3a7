import { createHash } from "node:crypto";
import { ListMultipartUploadsCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import type { StorageBackend } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { S3BackendOptions } from "../src/index.js";
import {
  backendOn,
  createBucket,
  emptyBucket,
  rawClient,
  type S3Server,
  s3Server,
  uniqueName,
} from "../src/testing/index.js";
import { type Fault, type FaultProxy, type SeenRequest, startFaultProxy } from "./fault-proxy.js";

const found = s3Server();
const MIB = 1024 * 1024;
const md5 = (text: string | Buffer) => createHash("md5").update(text).digest("hex");

/**
 * Faults between the backend and a real Ceph RGW: answers lost after the service did the work,
 * uploads and downloads that stall. Each test names the requests it disturbs by key.
 */
describe.skipIf(found === undefined)(
  "s3 backend through a fault-injecting proxy to Ceph RGW",
  () => {
    const server = found as S3Server;
    let bucket = "";
    let proxy: FaultProxy | undefined;
    let backend: StorageBackend | undefined;
    /** Faults by request; `pass` when no rule matches. Rules are checked in order. */
    let rules: ((request: SeenRequest) => Fault | undefined)[] = [];

    beforeAll(async () => {
      bucket = await createBucket(server, "faults");
    });
    afterAll(async () => {
      if (bucket) await emptyBucket(server, bucket, "", true);
    });
    afterEach(async () => {
      await backend?.close();
      await proxy?.close();
      backend = undefined;
      proxy = undefined;
      rules = [];
    });

    const proxied = async (extra: Partial<S3BackendOptions> = {}) => {
      const prefix = uniqueName("f");
      proxy = await startFaultProxy(server.endpoint, (request) => {
        for (const rule of rules) {
          const fault = rule(request);
          if (fault !== undefined) return fault;
        }
        return { kind: "pass" };
      });
      backend = backendOn({ ...server, endpoint: proxy.endpoint }, bucket, prefix, extra);
      const keyPath = (path: string) => `/${bucket}/${prefix}/${path}`;
      /** The requests of one method to one logical path, in order. */
      const seen = (method: string, path: string) =>
        (proxy as FaultProxy).requests.filter(
          (request) => request.method === method && request.path === keyPath(path),
        );
      /** A fault for the `nth` (1-based) request of `method` to `path` from now on. */
      const on = (method: string, path: string, nth: number, fault: Fault) => {
        let count = 0;
        rules.push((request) => {
          if (request.method !== method || request.path !== keyPath(path)) return undefined;
          count += 1;
          return count === nth ? fault : undefined;
        });
      };
      return { backend, prefix, seen, on, key: (path: string) => `${prefix}/${path}` };
    };

    /** Someone else's unconditional write of a key, straight to the service. */
    const writeDirectly = async (key: string, body: string) => {
      const client = rawClient(server);
      try {
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
      } finally {
        client.destroy();
      }
    };

    describe("a write whose answer is lost", () => {
      it("resolves a no-clobber create that its own retry saw as existing", async () => {
        const { backend, seen, on } = await proxied();
        const path = "run/.distributor.lease.json";
        on("PUT", path, 1, { kind: "lose-answer" });
        const { version } = await backend.writeFile(path, "lease of run 1");
        // The first PUT was stored (200, answer lost); the SDK's retry met it (412).
        expect(seen("PUT", path).map((request) => request.status)).toEqual([200, 412]);
        expect(version).toBe(md5("lease of run 1"));
        const stored = await backend.readVersioned(path);
        expect(Buffer.from(stored.bytes).toString()).toBe("lease of run 1");
        expect(stored.version).toBe(version);
      });

      it("resolves a compare-and-swap that its own retry saw as a conflict", async () => {
        const { backend, seen, on } = await proxied();
        const path = "site/.distributor.json";
        const first = await backend.writeFile(path, '{"state": 1}\n');
        on("PUT", path, 1, { kind: "lose-answer" });
        const { version } = await backend.writeFile(path, '{"state": 2}\n', {
          ifMatch: first.version,
        });
        expect(seen("PUT", path).map((request) => request.status)).toEqual([200, 200, 412]);
        expect(version).toBe(md5('{"state": 2}\n'));
        const stored = await backend.readVersioned(path);
        expect(Buffer.from(stored.bytes).toString()).toBe('{"state": 2}\n');
        expect(stored.version).toBe(version);
      });

      it("resolves it without any retry: the reset itself is read back", async () => {
        const { backend, seen, on } = await proxied({ maxAttempts: 1 });
        const path = "single/.distributor.lease.json";
        on("PUT", path, 1, { kind: "lose-answer" });
        const { version } = await backend.writeFile(path, "lease");
        expect(seen("PUT", path).map((request) => request.status)).toEqual([200]);
        expect(version).toBe(md5("lease"));
        expect(Buffer.from(await backend.readFile(path)).toString()).toBe("lease");
      });

      it("still fails a create when another write replaced it before the retry", async () => {
        const { backend, seen, on, key } = await proxied();
        const path = "taken/.distributor.lease.json";
        on("PUT", path, 1, {
          kind: "lose-answer",
          meanwhile: () => writeDirectly(key(path), "lease of someone else"),
        });
        await expectStorageError(backend.writeFile(path, "lease of run 1"), "already_exists");
        expect(seen("PUT", path).map((request) => request.status)).toEqual([200, 412]);
        expect(Buffer.from(await backend.readFile(path)).toString()).toBe("lease of someone else");
      });

      it("still fails a compare-and-swap when another write replaced it before the retry", async () => {
        const { backend, seen, on, key } = await proxied();
        const path = "moved/.distributor.json";
        const first = await backend.writeFile(path, '{"state": 1}\n');
        on("PUT", path, 1, {
          kind: "lose-answer",
          meanwhile: () => writeDirectly(key(path), '{"state": "theirs"}\n'),
        });
        const error = await expectStorageError(
          backend.writeFile(path, '{"state": 2}\n', { ifMatch: first.version }),
          "conflict",
        );
        expect(error.message).toContain(`found ${md5('{"state": "theirs"}\n')}`);
        expect(seen("PUT", path).map((request) => request.status)).toEqual([200, 200, 412]);
        expect(Buffer.from(await backend.readFile(path)).toString()).toBe('{"state": "theirs"}\n');
      });
    });

    describe("a request that stalls", () => {
      const payload = Buffer.from(Uint8Array.from({ length: 2 * MIB }, (_, i) => i % 251));

      it("ends a download that stops mid-way when the caller's signal fires", async () => {
        const { backend, on } = await proxied({ requestTimeoutMs: 600_000 });
        await backend.writeFile("d/blob.bin", payload);
        on("GET", "d/blob.bin", 1, { kind: "stall-answer", bytes: 64 * 1024 });
        const controller = new AbortController();
        const reason = new Error("interrupted mid-download");
        setTimeout(() => controller.abort(reason), 300);
        const started = Date.now();
        await expect(backend.readFile("d/blob.bin", { signal: controller.signal })).rejects.toBe(
          reason,
        );
        expect(Date.now() - started).toBeLessThan(5_000);
      });

      it("fails a download that stops mid-way once requestTimeoutMs passes", async () => {
        const { backend, on, key } = await proxied({ requestTimeoutMs: 500 });
        await backend.writeFile("d/blob.bin", payload);
        on("GET", "d/blob.bin", 1, { kind: "stall-answer", bytes: 64 * 1024 });
        const started = Date.now();
        const error = await expectStorageError(backend.readFile("d/blob.bin"), "unavailable");
        expect(error.message).toContain(
          `request for s3://${bucket}/${key("d/blob.bin")} timed out`,
        );
        expect(Date.now() - started).toBeLessThan(5_000);
      });

      it("ends an upload that stops mid-way when the caller's signal fires", async () => {
        const { backend, on, seen } = await proxied({ requestTimeoutMs: 600_000 });
        on("PUT", "u/blob.bin", 1, { kind: "stall-request" });
        const controller = new AbortController();
        const reason = new Error("interrupted mid-upload");
        setTimeout(() => controller.abort(reason), 300);
        const started = Date.now();
        await expect(
          backend.writeFile("u/blob.bin", payload, { overwrite: true, signal: controller.signal }),
        ).rejects.toBe(reason);
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(seen("PUT", "u/blob.bin")).toHaveLength(1);
        await expectStorageError(backend.stat("u/blob.bin"), "not_found");
      });

      it("ends a multipart upload whose part stalls when the signal fires, and aborts it", async () => {
        const { backend, key } = await proxied({
          requestTimeoutMs: 600_000,
          multipartThreshold: 5 * MIB,
          partSize: 5 * MIB,
        });
        const large = Buffer.alloc(12 * MIB, 7);
        rules.push((request) =>
          request.method === "PUT" && request.query.includes("partNumber=2")
            ? { kind: "stall-request" }
            : undefined,
        );
        const controller = new AbortController();
        const reason = new Error("interrupted mid-part");
        setTimeout(() => controller.abort(reason), 500);
        await expect(
          backend.writeFile("u/large.bin", large, { overwrite: true, signal: controller.signal }),
        ).rejects.toBe(reason);
        const client = rawClient(server);
        try {
          const uploads = await client.send(
            new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: key("u/") }),
          );
          expect(uploads.Uploads ?? []).toEqual([]);
        } finally {
          client.destroy();
        }
      });
    });
  },
);
