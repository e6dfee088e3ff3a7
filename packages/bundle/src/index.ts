export {
  ARCHIVE_LIMIT_CODES,
  ArchiveError,
  type ArchiveErrorCode,
  type ExtractArchiveOptions,
  type ExtractedArchive,
  extractArchive,
} from "./archive/extract.js";
export {
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
export {
  type ElementHook,
  JSON_SLICE_CHARS,
  type PiecedJson,
  parseJsonPiecesSteps,
  parseJsonSteps,
  parseStrictJsonSteps,
  type TextPieces,
} from "./json-slices.js";
export {
  buildManifest,
  frozenManifestFromJsonSteps,
  isFrozenManifest,
  parseFrozenManifest,
  parseFrozenManifestSteps,
  parseManifest,
  verifiedManifestText,
} from "./manifest.js";
export { bundleIdProblem, MANIFEST_FILE_NAME, SIGNATURE_FILE_NAME } from "./manifest-checks.js";
export { sharedManifestFile } from "./manifest-sharing.js";
export { serializeManifest } from "./manifest-text.js";
export type { Manifest, ManifestFile } from "./manifest-types.js";
export {
  describeNameCollision,
  type NameCollision,
  nameCollisions,
  nameCollisionsSteps,
} from "./portable-names.js";
export {
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
export {
  type SignedBundle,
  SigningError,
  type SignOptions,
  signBundleManifest,
} from "./signature/sign.js";
export {
  type BundleSigner,
  DEFAULT_SIGNATURE_NAMESPACE,
  readSignedManifest,
  type SignaturePolicy,
  type SignedManifest,
} from "./signature/verify.js";
export { formatTimestamp, isRepresentableDate, parseTimestamp } from "./timestamp.js";
export {
  isUtf8Steps,
  runWithStreamedPieces,
  StreamedUtf8Pieces,
  utf8Pieces,
  WholeTextNeeded,
} from "./utf8-pieces.js";
export {
  DEFAULT_MAX_FILES,
  DEFAULT_MAX_TOTAL_SIZE,
  type FileCheckProgress,
  type MaxFilesSetting,
  nameCollisionIssues,
  type UnlistedFilesPolicy,
  type ValidateBundleOptions,
  type ValidatedBundle,
  validateBundle,
} from "./validate.js";
export { validateBundleDirectory } from "./validate-directory.js";
