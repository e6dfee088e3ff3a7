import { gzipSync } from "node:zlib";
import { Header, type HeaderData } from "tar";

/** One entry of a hand-built archive: any header `tar` can encode, and its body. */
export interface RawEntry extends HeaderData {
  body?: Buffer | string;
}

/**
 * A tar stream built header by header, for the entries no packer would write (`../x`, links,
 * devices, duplicates): the extractor's tests and the upload server's tests both need them.
 */
export function rawTar(entries: readonly RawEntry[], gzip = false): Buffer {
  const blocks: Buffer[] = [];
  for (const { body, ...header } of entries) {
    const data = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
    const block = Buffer.alloc(512);
    new Header({
      mode: 0o644,
      mtime: new Date("2026-06-04T11:55:00Z"),
      type: "File",
      ...header,
      size: header.size ?? data.length,
    }).encode(block, 0);
    blocks.push(block, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  const archive = Buffer.concat(blocks);
  return gzip ? gzipSync(archive) : archive;
}
