import { readdir } from "node:fs/promises";
import { c as createTar } from "tar";

// What the suites that load `distributor serve` with many uploads share: the archives they send,
// one upload request, and the run lines `serve` logs.

/** One upload a suite sends, and the run id of the first 202 or replay it received. */
export interface Upload {
  index: number;
  pipeline: string;
  key: string;
  archive: Buffer;
  runId?: string;
}

/** The bundle in `directory` as a gzip tar archive, entries in name order. */
export async function pack(directory: string): Promise<Buffer> {
  const names = (await readdir(directory)).sort();
  const chunks: Buffer[] = [];
  for await (const chunk of createTar({ gzip: true, cwd: directory, portable: true }, names)) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** POSTs `upload` with its idempotency key; the answer's status and run id. */
export async function postUpload(
  url: string,
  token: string,
  upload: Upload,
): Promise<{ status: number; runId?: string; code?: string; retryAfter?: string }> {
  const response = await fetch(`${url}/pipelines/${upload.pipeline}/uploads`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${token}`,
      "Content-Type": "application/gzip",
      "Idempotency-Key": upload.key,
    },
    body: new Uint8Array(upload.archive),
    signal: AbortSignal.timeout(20_000),
  });
  const body = (await response.json()) as { run_id?: string; error?: { code: string } };
  const retryAfter = response.headers.get("retry-after");
  return {
    status: response.status,
    ...(body.run_id ? { runId: body.run_id } : {}),
    ...(body.error ? { code: body.error.code } : {}),
    ...(retryAfter === null ? {} : { retryAfter }),
  };
}

/** The `created` of the `index`-th bundle: one minute apart, so every upload is newer. */
export function createdOf(index: number): string {
  return new Date(Date.parse("2026-06-04T00:00:00Z") + index * 60_000)
    .toISOString()
    .replace(".000", "");
}

/** A run line of `serve`'s log. */
export interface RunEvent {
  run_id: string;
  pipeline_id: string;
  status: string;
  started_at: string;
  finished_at: string;
}

/** The run lines in `serve`'s stderr, in order. */
export function runEvents(stderr: string): RunEvent[] {
  return stderr
    .split("\n")
    .filter((line) => line.includes('"type":"run"'))
    .map((line) => JSON.parse(line) as RunEvent);
}
