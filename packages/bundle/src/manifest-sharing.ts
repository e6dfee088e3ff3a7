import type { ManifestFile } from "./manifest-types.js";

/**
 * `shared` when `entry`, a files entry as `JSON.parse` decoded it, is exactly that file (the same
 * three members, nothing else), else `entry`: an `ElementHook` for a reader of a document that
 * embeds a manifest the caller holds, so that the copy holds no objects of its own.
 */
export function sharedManifestFile(entry: unknown, shared: ManifestFile | undefined): unknown {
  if (shared === undefined || typeof entry !== "object" || entry === null) return entry;
  const { path, sha256, size } = entry as Record<string, unknown>;
  return path === shared.path &&
    sha256 === shared.sha256 &&
    size === shared.size &&
    !Object.is(size, -0) &&
    Object.keys(entry).length === 3 &&
    Object.hasOwn(entry, "size")
    ? shared
    : entry;
}
