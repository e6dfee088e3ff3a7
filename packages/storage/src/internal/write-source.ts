import type { Readable } from "node:stream";
import type { WriteData } from "../backend.js";

/** Something `stream.pipeline` accepts as its source. */
export type WriteSource = Iterable<Uint8Array> | AsyncIterable<Uint8Array> | Readable;

/** Turns every accepted write payload into a pipeline source; strings are UTF-8. */
export function writeSource(data: WriteData): WriteSource {
  if (typeof data === "string") return [Buffer.from(data, "utf8")];
  if (data instanceof Uint8Array) return [data];
  return data;
}

/**
 * A write takes ownership of a stream source: when it fails before (or while) consuming it, the
 * stream is destroyed so an open file or socket behind it is released, as `pipeline` would do.
 */
export function releaseSource(data: WriteData): void {
  const destroy = (data as { destroy?: unknown }).destroy;
  if (typeof destroy === "function") destroy.call(data);
}

/**
 * A stream handed to a write may fail before the backend starts reading it (a file stream whose
 * open fails, a transform that rejects its input). Without a listener that error would crash the
 * process; with this one it stays on the stream, and the write's pipeline reports it.
 */
export function holdSourceErrors(data: WriteData): void {
  const on = (data as { on?: unknown }).on;
  if (typeof on === "function") on.call(data, "error", ignore);
}

function ignore(): void {}
