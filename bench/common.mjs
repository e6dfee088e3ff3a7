// Helpers the benchmarks share: generating large files without holding them in memory,
// summarising timings, and the environment that points distributor and rclone at one S3 server.
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";

/** Writes `bytes` of random data to `path` in 1 MiB chunks, honouring back-pressure. */
export async function writeSized(path, bytes) {
  const chunk = randomBytes(Math.min(bytes, 1 << 20));
  const out = createWriteStream(path);
  let left = bytes;
  while (left > 0) {
    const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
    if (!out.write(piece)) await new Promise((resolve) => out.once("drain", resolve));
    left -= piece.length;
  }
  await new Promise((resolve, reject) => out.end((error) => (error ? reject(error) : resolve())));
}

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
export const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/**
 * The environment of an S3 benchmark: distributor's credentials (`BENCH_S3_KEY`/`_SECRET`, which
 * its configurations reference) and an rclone remote `bench:` for the same server, path-style.
 * The endpoint is left to the caller (`RCLONE_CONFIG_BENCH_ENDPOINT`): direct, or a proxy.
 */
export function s3BenchEnv(key, secret) {
  const env = {
    ...process.env,
    BENCH_S3_KEY: key,
    BENCH_S3_SECRET: secret,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    RCLONE_CONFIG_BENCH_TYPE: "s3",
    RCLONE_CONFIG_BENCH_PROVIDER: "Ceph",
    RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: key,
    RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: secret,
    RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE: "true",
  };
  // rclone honours AWS_CA_BUNDLE even for http:// endpoints; the SDK does not.
  delete env.AWS_CA_BUNDLE;
  return env;
}
