export {
  isSecretName,
  type ResolveSecretOptions,
  resolveSecret,
  SECRET_NAME_PATTERN,
  SecretError,
} from "@distributor/storage";
export { CONFIG_DEFAULTS } from "./defaults.js";
export { parseDuration } from "./duration.js";
export { ConfigError, type ConfigErrorOptions, isConfigError } from "./errors.js";
export {
  type LoadConfigOptions,
  loadConfig,
  type ParseConfigOptions,
  parseConfig,
} from "./load.js";
export { configSchema, type RawConfig } from "./schema.js";
export { parseSize, SIZE_UNITS } from "./size.js";
export type {
  Backend,
  Config,
  DestinationConfig,
  HostKeyPolicy,
  HttpServerConfig,
  HttpUploadSource,
  LinkPrimary,
  LinksPolicy,
  LocalLocation,
  MarkdownToHtmlTransform,
  OnConflict,
  OnDestinationNewer,
  OnDestinationOlder,
  OnDestinationSame,
  PathMappingMode,
  PathMappingPolicy,
  PipelineConfig,
  PrunePolicy,
  PublishPolicy,
  ReconciliationMode,
  ReconciliationPolicy,
  RemoteTimeouts,
  RetentionPolicy,
  S3Credentials,
  S3Location,
  SecretsConfig,
  ServerConfig,
  SourceBackend,
  SourceConfig,
  SshLocation,
  StateMode,
  StatePolicy,
  StorageLocation,
  TransferPolicy,
  TransformMode,
  TransformPolicy,
  UnlistedFilesPolicy,
  UploadTokenConfig,
  ValidationPolicy,
} from "./types.js";
