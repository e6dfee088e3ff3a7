/** One file listed in a bundle manifest. */
export interface ManifestFile {
  /** Logical path relative to the bundle directory. */
  path: string;
  /** `sha256:` followed by 64 lowercase hex digits. */
  sha256: string;
  /** Size in bytes. */
  size: number;
}

/** A parsed, validated `manifest.json` (docs/design/bundles.md). */
export interface Manifest {
  schemaVersion: 1;
  id: string;
  /** Creation time; serialised as RFC 3339 in UTC. */
  created: Date;
  /** Bundle digest over `files`. */
  digest: string;
  /** Files in ascending byte order of path. */
  files: ManifestFile[];
}
