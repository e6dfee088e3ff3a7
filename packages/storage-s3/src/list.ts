import { type _Object, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import { compareLogicalPaths, pathProblem, type StorageEntry } from "@distributor/storage";
import { escapeName } from "@distributor/storage/adapter";
import { s3Error } from "./errors.js";
import { type KeySpace, versionOf } from "./keys.js";

export interface ListPage {
  objects: _Object[];
  /** Directory names (`dir/` relative key prefixes) when listing with a delimiter. */
  commonPrefixes: string[];
}

/**
 * A listing page said more keys follow but gave no token to ask for them. Ending the listing there
 * would pass a partial listing off as complete (a walk missing entries, a delete leaving keys).
 */
export class IncompleteListing extends Error {
  override readonly name = "IncompleteListing";
}

/**
 * ListObjectsV2 page by page: one page (at most 1 000 keys) is held at a time, so a caller that
 * consumes pages as they come stays bounded whatever the number of keys.
 */
export async function* listPages(
  client: S3Client,
  bucket: string,
  prefix: string,
  options: { delimiter?: boolean; pageSize?: number; signal?: AbortSignal | undefined } = {},
): AsyncGenerator<ListPage> {
  let token: string | undefined;
  do {
    const response = await client.send(
      new ListObjectsV2Command({
        Bucket: bucket,
        Prefix: prefix,
        ContinuationToken: token,
        ...(options.delimiter ? { Delimiter: "/" } : {}),
        ...(options.pageSize === undefined ? {} : { MaxKeys: options.pageSize }),
      }),
      { abortSignal: options.signal },
    );
    yield {
      objects: response.Contents ?? [],
      commonPrefixes: (response.CommonPrefixes ?? []).flatMap((entry) =>
        entry.Prefix === undefined ? [] : [entry.Prefix],
      ),
    };
    // Reached only when the consumer asks for more: one that stops after the first page (`hasAny`)
    // has its answer.
    token = response.IsTruncated ? response.NextContinuationToken : undefined;
    if (response.IsTruncated && !token) {
      throw new IncompleteListing(
        `listing page truncated without a continuation token (ListObjectsV2 of s3://${bucket}/${prefix})`,
      );
    }
  } while (token !== undefined);
}

/** Whether any key starts with `prefix`. */
export async function anyKeyBelow(
  client: S3Client,
  bucket: string,
  prefix: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  for await (const page of listPages(client, bucket, prefix, { pageSize: 1, signal })) {
    return page.objects.length > 0 || page.commonPrefixes.length > 0;
  }
  return false;
}

/**
 * Entries below a logical prefix. Directories are virtual: every key `a/b/c` implies `a` and
 * `a/b`, and a zero-byte `a/` key (a "folder" some consoles create) is the directory `a`. Names
 * that are not logical paths (`a//b`, `x/../y`) are reported with `nameProblem` and not descended.
 */
export async function walkKeys(
  client: S3Client,
  keys: KeySpace,
  prefix: string,
  options: { recursive: boolean; limit: number; signal?: AbortSignal | undefined },
): Promise<StorageEntry[]> {
  const listed = keys.below(prefix);
  const entries = new Map<string, StorageEntry>();
  const add = (entry: StorageEntry): void => {
    if (entries.has(entry.path)) return;
    entries.set(entry.path, entry);
    if (entries.size > options.limit) {
      throw s3Error("limit_exceeded", "walk", prefix, `more than ${options.limit} entries`);
    }
  };
  const pages = listPages(client, keys.bucket, listed, {
    delimiter: !options.recursive,
    signal: options.signal,
  });
  for await (const page of pages) {
    for (const common of page.commonPrefixes) {
      const relative = common.slice(listed.length);
      addRelative(add, prefix, relative, undefined, false);
    }
    for (const object of page.objects) {
      if (object.Key === undefined) continue;
      const relative = object.Key.slice(listed.length);
      addRelative(add, prefix, relative, object, options.recursive);
    }
  }
  return [...entries.values()].sort((left, right) => compareLogicalPaths(left.path, right.path));
}

function addRelative(
  add: (entry: StorageEntry) => void,
  prefix: string,
  relative: string,
  object: _Object | undefined,
  recursive: boolean,
): void {
  // The prefix's own folder marker is not an entry below it.
  if (relative === "") return;
  const marker = relative.endsWith("/");
  const segments = (marker ? relative.slice(0, -1) : relative).split("/");
  const depth = recursive ? segments.length : 1;
  for (let index = 0; index < depth; index++) {
    const segment = segments[index] as string;
    const last = index === segments.length - 1;
    const isFile = last && !marker && object !== undefined;
    const problem = pathProblem(segment);
    if (problem !== undefined) {
      // The rest of the key is one odd name: a file when the key is an object, not a folder.
      const rest = segments.slice(index).join("/") + (marker ? "/" : "");
      const oddFile = !marker && object !== undefined && (recursive || segments.length === 1);
      const entry: StorageEntry = {
        path: joinPath(prefix, [...segments.slice(0, index), shownName(rest)]),
        kind: oddFile ? "file" : "directory",
        size: oddFile ? (object?.Size ?? 0) : 0,
        nameProblem: problem.replace(/^path/, "name"),
      };
      add(entry);
      return;
    }
    const path = joinPath(prefix, segments.slice(0, index + 1));
    if (isFile && object !== undefined) add(fileEntry(path, object));
    else add({ path, kind: "directory", size: 0 });
  }
}

function fileEntry(path: string, object: _Object): StorageEntry {
  const entry: StorageEntry = { path, kind: "file", size: object.Size ?? 0 };
  if (object.LastModified !== undefined) entry.modifiedAt = object.LastModified;
  const version = versionOf(object.ETag);
  if (version !== undefined) entry.version = version;
  return entry;
}

function joinPath(prefix: string, segments: readonly string[]): string {
  const relative = segments.join("/");
  return prefix === "" ? relative : `${prefix}/${relative}`;
}

/**
 * A key remainder that is no logical path, as people read it. It always holds a backslash, so it
 * can never be passed back as a valid path: when `escapeName` left none (`a//b`, `..`, an
 * over-long segment), the first character is written as `\xNN` bytes.
 */
function shownName(rest: string): string {
  const escaped = escapeName(Buffer.from(rest, "utf8"));
  if (escaped.includes("\\")) return escaped;
  const first = String.fromCodePoint(escaped.codePointAt(0) ?? 0x2f);
  const bytes = [...Buffer.from(first, "utf8")].map(
    (byte) => `\\x${byte.toString(16).padStart(2, "0")}`,
  );
  return bytes.join("") + escaped.slice(first.length);
}
