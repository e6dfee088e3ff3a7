/**
 * Where the logical paths of one backend live in its bucket. Every key is `<prefix>/<path>` (or
 * `<path>` for a backend at the bucket root); a key outside the prefix is never built, so nothing
 * outside it is listed, written or deleted.
 */
export class KeySpace {
  /** Key prefix every object of this backend starts with: `""` or `<prefix>/`. */
  readonly base: string;

  constructor(
    readonly bucket: string,
    prefix: string,
  ) {
    this.base = prefix === "" ? "" : `${prefix}/`;
  }

  /** Object key of a logical path (the root `""` has no object of its own). */
  key(path: string): string {
    return path === "" ? this.base.slice(0, -1) : `${this.base}${path}`;
  }

  /** Key prefix of everything below a logical prefix (a directory). */
  below(prefix: string): string {
    return prefix === "" ? this.base : `${this.base}${prefix}/`;
  }

  /** How an operator finds a path: `s3://bucket/key`. */
  url(path: string): string {
    return `s3://${this.bucket}/${this.key(path)}`;
  }
}

/** ETags arrive quoted (`"abc"`, `&quot;abc&quot;` in some listings); the version token is bare. */
export function versionOf(etag: string | undefined): string | undefined {
  if (etag === undefined) return undefined;
  const bare = etag.replaceAll("&quot;", '"').replace(/^W\//, "");
  return bare.startsWith('"') && bare.endsWith('"') && bare.length >= 2 ? bare.slice(1, -1) : bare;
}
