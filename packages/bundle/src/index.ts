export {
  ARCHIVE_LIMIT_CODES,
  ArchiveError,
  type ArchiveErrorCode,
  type ExtractArchiveOptions,
  type ExtractedArchive,
  extractArchive,
  locateBundle,
} from "./archive/extract.js";
export {
  ARCHIVE_DIRECTORY_MODE,
  ARCHIVE_FILE_MODE,
  BUNDLE_ARCHIVE_CONTENT_TYPE,
  type PackBundleOptions,
  type PackedBundle,
  packBundle,
} from "./archive/pack.js";
export {
  type CreatedManifest,
  type CreateManifestOptions,
  createManifest,
  DEFAULT_CREATE_MAX_FILES,
} from "./create.js";
export {
  bundleDigest,
  bundleDigestText,
  createDigestStream,
  type DigestedFile,
  DigestStream,
  digestStream,
  type FileDigest,
  FileHasher,
  fileDigest,
  isSha256Digest,
  SHA256_PATTERN,
} from "./digest.js";
export {
  DEFAULT_DISCOVERY_LIMIT,
  type DiscoverBundlesOptions,
  type DiscoveredBundle,
  discoverBundles,
} from "./discover.js";
export {
  type BundleIssue,
  type BundleIssueCode,
  BundleValidationError,
  type BundleValidationErrorOptions,
  ManifestError,
  type ManifestErrorOptions,
} from "./errors.js";
export { JSON_SLICE_CHARS, parseJsonSteps, parseStrictJsonSteps } from "./json-slices.js";
export {
  BUNDLE_ID_PATTERN,
  buildManifest,
  buildManifestSteps,
  bundleIdProblem,
  frozenManifestFromJsonSteps,
  isFrozenManifest,
  MANIFEST_FILE_NAME,
  MANIFEST_SCHEMA_VERSION,
  type ManifestDraft,
  manifestPathProblem,
  parseFrozenManifest,
  parseFrozenManifestSteps,
  parseManifest,
  SIGNATURE_FILE_NAME,
  verifiedManifestText,
} from "./manifest.js";
export { serializeManifest, serializeManifestSteps } from "./manifest-text.js";
export type { Manifest, ManifestFile } from "./manifest-types.js";
export {
  describeNameCollision,
  type NameCollision,
  nameCollisions,
  nameCollisionsSteps,
} from "./portable-names.js";
export {
  MANIFEST_BYTES_PER_FILE,
  MAX_MANIFEST_BYTES,
  manifestByteLimit,
  type ReadManifestOptions,
  readManifest,
} from "./read-manifest.js";
export { type SelectableBundle, selectNewestBundle } from "./select.js";
export {
  type AllowedSigner,
  AllowedSignersError,
  parseAllowedSigners,
} from "./signature/allowed-signers.js";
export { sshFingerprint } from "./signature/public-key.js";
export {
  DEFAULT_SIGN_TIMEOUT_MS,
  type MadeSignature,
  type SignedBundle,
  SigningError,
  type SignOptions,
  signBundleManifest,
  signWithSshKeygen,
} from "./signature/sign.js";
export {
  type BundleSigner,
  checkManifestSignature,
  DEFAULT_SIGNATURE_NAMESPACE,
  readSignedManifest,
  type SignatureCheck,
  type SignaturePolicy,
  type SignedManifest,
} from "./signature/verify.js";
export {
  formatTimestamp,
  isRepresentableDate,
  parseTimestamp,
  type TimestampParse,
  truncateToSeconds,
} from "./timestamp.js";
export {
  DEFAULT_MAX_FILES,
  DEFAULT_MAX_TOTAL_SIZE,
  DEFAULT_VALIDATION_CONCURRENCY,
  type FileCheckProgress,
  type MaxFilesSetting,
  nameCollisionIssues,
  type UnlistedFilesPolicy,
  type ValidateBundleOptions,
  type ValidatedBundle,
  validateBundle,
} from "./validate.js";
export { validateBundleDirectory } from "./validate-directory.js";
