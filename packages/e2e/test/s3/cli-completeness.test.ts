import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import {
  type CompletenessHarness,
  type DestinationKeys,
  htmlTurnedOnAndOff,
  rollbackAfterInterruptedReplacement,
  rollbackBundles,
  spawnCli,
} from "@distributor/cli/testing";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  createBucket,
  emptyBucket,
  rawClient,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, afterEach, beforeAll, beforeEach, describe, it } from "vitest";
import { runCliIn } from "./cli-process.js";

// What a success report promises (docs/operations.md), on S3 (Ceph RGW) through the real CLI
// process: a replacement killed part-way and rolled back to the older source is completed by a
// plain run (action `complete`), and the HTML output turned on and off converges both ways.

const found = s3Server();

describe.skipIf(found === undefined)("complete publications on S3 (Ceph RGW)", () => {
  const server = found as S3Server;
  const env: Record<string, string> = {
    TEST_S3_KEY: found?.accessKeyId ?? "",
    TEST_S3_SECRET: found?.secretAccessKey ?? "",
  };
  let bucket = "";
  let dir = "";

  beforeAll(async () => {
    bucket = await createBucket(server, "complete");
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-complete-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A fresh prefix of the bucket, read back by listing (ETags) and GET. */
  const s3Harness = (): CompletenessHarness => {
    const prefix = uniqueName("complete");
    const configPath = join(dir, "distributor.yml");
    const keys = (set: DestinationKeys) =>
      (set.fixed ? ", path_mapping: {mode: fixed}" : "") +
      (set.html
        ? ", publish: {source: true, html: true}, transform: {markdown_to_html: {enabled: true}}"
        : "");
    return {
      destinationId: "bucket",
      workDir: () => dir,
      configure: async (source, set) => {
        await writeFile(
          configPath,
          `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: bucket, backend: s3, bucket: ${bucket}, prefix: ${prefix}, endpoint: "${server.endpoint}", force_path_style: true, credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}${keys(set)}}\n`,
        );
        return configPath;
      },
      run: (args) => runCliIn(dir, env, args),
      spawn: (args) => spawnCli(args, { cwd: dir, env }),
      stored: async () => {
        const client = rawClient(server);
        const listed: Record<string, string> = {};
        try {
          let token: string | undefined;
          do {
            const page = await client.send(
              new ListObjectsV2Command({
                Bucket: bucket,
                Prefix: `${prefix}/`,
                ...(token === undefined ? {} : { ContinuationToken: token }),
              }),
            );
            for (const object of page.Contents ?? []) {
              listed[(object.Key ?? "").slice(prefix.length + 1)] = object.ETag ?? "";
            }
            token = page.IsTruncated ? page.NextContinuationToken : undefined;
          } while (token !== undefined);
        } finally {
          client.destroy();
        }
        return listed;
      },
      // A single PUT's ETag: the quoted MD5 of the bytes.
      fingerprint: (text) => `"${createHash("md5").update(text).digest("hex")}"`,
      state: async () => {
        const client = rawClient(server);
        try {
          const response = await client.send(
            new GetObjectCommand({ Bucket: bucket, Key: `${prefix}/.distributor.json` }),
          );
          return JSON.parse((await response.Body?.transformToString()) ?? "");
        } finally {
          client.destroy();
        }
      },
    };
  };

  it("SIGKILL part-way through a replacement, then a plain run of the older source completes it; the newer one replaces it again", async () => {
    // Fewer objects than the local case (5 000), for the test run's time: every poll for
    // progress lists the prefix, and recovery looks at each path the killed run replaced in place
    // (a GET, and a PUT where the bytes still match), `transfers` at a time.
    await rollbackAfterInterruptedReplacement(s3Harness(), rollbackBundles(1_000), "SIGKILL");
  }, 300_000);

  it("SIGINT part-way through a replacement: the run cleans up after itself, and a plain run of the older source completes it", async () => {
    await rollbackAfterInterruptedReplacement(s3Harness(), rollbackBundles(1_000), "SIGINT");
  }, 300_000);

  it("HTML turned on is completed, turned off is removed, then the run skips", async () => {
    await htmlTurnedOnAndOff(s3Harness());
  }, 60_000);
});
