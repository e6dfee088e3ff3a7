import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, inject } from "vitest";
import { createS3Backend, type S3BackendOptions } from "../backend.js";
import type { S3Server } from "./ceph.js";

/** The shared gateway, or undefined (with the reason printed once) when the suite must skip. */
export function s3Server(): S3Server | undefined {
  const server = inject("s3Server");
  if (server !== null) return server;
  console.warn(`skipping the S3 suites: ${inject("s3Unavailable")}`);
  return undefined;
}

export function rawClient(
  server: S3Server,
  credentials?: { accessKeyId: string; secretAccessKey: string },
) {
  return new S3Client({
    region: server.region,
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials: credentials ?? {
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
}

/** A bucket name no other test uses. */
export function uniqueName(label: string): string {
  return `${label}-${randomBytes(5).toString("hex")}`;
}

export async function createBucket(server: S3Server, label = "test"): Promise<string> {
  const bucket = uniqueName(label);
  const client = rawClient(server);
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    client.destroy();
  }
  return bucket;
}

/**
 * A bucket of the calling suite's own on the shared gateway: made before its tests, emptied and
 * removed after them. `name()` is the bucket's name once made (`""` before, and when the gateway is
 * unavailable and the suite skips).
 */
export function useBucket(server: S3Server | undefined, label: string): { name(): string } {
  let bucket = "";
  beforeAll(async () => {
    if (server !== undefined) bucket = await createBucket(server, label);
  });
  afterAll(async () => {
    if (server !== undefined && bucket !== "") await emptyBucket(server, bucket, "", true);
  });
  return { name: () => bucket };
}

/** Every key of a bucket (or below a key prefix), for assertions on what is really stored. */
export async function listKeys(server: S3Server, bucket: string, prefix = ""): Promise<string[]> {
  const client = rawClient(server);
  const keys: string[] = [];
  try {
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) if (object.Key) keys.push(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  } finally {
    client.destroy();
  }
  return keys;
}

/** Deletes a bucket's keys (below a prefix), and the bucket itself when `remove`. */
export async function emptyBucket(server: S3Server, bucket: string, prefix = "", remove = false) {
  const keys = await listKeys(server, bucket, prefix);
  const client = rawClient(server);
  try {
    for (let start = 0; start < keys.length; start += 1000) {
      await client.send(
        new DeleteObjectsCommand({
          Bucket: bucket,
          Delete: { Objects: keys.slice(start, start + 1000).map((Key) => ({ Key })), Quiet: true },
        }),
      );
    }
    if (remove) await client.send(new DeleteBucketCommand({ Bucket: bucket }));
  } finally {
    client.destroy();
  }
}

export function backendOn(
  server: S3Server,
  bucket: string,
  prefix = "",
  extra: Partial<S3BackendOptions> = {},
) {
  return createS3Backend({
    bucket,
    prefix,
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    ...extra,
  });
}
