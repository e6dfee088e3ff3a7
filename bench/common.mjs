// Helpers the benchmarks share: generating large files without holding them in memory, and
// summarising timings.
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
