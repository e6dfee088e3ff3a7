import type {
  MetadataRule,
  OnConflict,
  OnDestinationNewer,
  OnDestinationOlder,
  OnDestinationSame,
  TransferPolicy,
} from "@distributor/engine";

export type {
  OnConflict,
  OnDestinationNewer,
  OnDestinationOlder,
  OnDestinationSame,
  TransferPolicy,
};
/**
 * The configuration after parsing, validation and defaults: every optional key has its value,
 * names are camelCase, durations are milliseconds and sizes are bytes. Local filesystem paths are
 * absolute. Secrets are references (environment variable / secret file names), never values.
 */
export interface Config {
  /** The file the configuration came from, or the name given to `parseConfig`. */
  sourceName: string;
  server: ServerConfig;
  secrets: SecretsConfig;
  /** Empty when no pipeline has an `http_upload` source. */
  uploadTokens: UploadTokenConfig[];
  pipelines: PipelineConfig[];
}

export interface ServerConfig {
  /**
   * The service identity its upload store records (`server.name`, or `config:<absolute path of
   * the configuration file>`): a store recorded for another service is refused.
   */
  service: string;
  /**
   * The absolute path of the configuration file (`sourceName` resolved): the default staging
   * area and store are this file's own, and a store in use names the file its holder serves.
   */
  configFile: string;
  /**
   * With `server.name` and default locations: the directory earlier versions used for this
   * service's staging area and store, shared by every file naming it (`serve` warns while a store
   * is left there).
   */
  earlierDirectory?: string;
  /** `server.metrics`: whether `GET /metrics` needs no token (default: any upload token). */
  metrics: { public: boolean };
  /** `server.log`: the least level of the JSON lines `serve` writes (default `info`). */
  log: { level: "debug" | "info" | "warn" | "error" };
  http: HttpServerConfig;
  uploads: ResumableUploadsConfig;
  store: StoreConfig;
  /** `server.staging`: absent when uploads stage in `http.stagingDirectory`, this instance's own. */
  staging?: StagingConfig;
}

/** `server.store`: where run records, the queue and idempotency records live (docs/integrations/http-upload.md). */
export interface StoreConfig {
  /**
   * `embedded` (durable, default), `memory` (forgotten on exit) or `postgres` (shared by several
   * `serve` instances; needs `@distributor/store-postgres` and `server.staging`).
   */
  backend: "embedded" | "memory" | "postgres";
  /** Absolute directory of the embedded store; default beside the staging directory. */
  path: string;
  /** Finished run records kept at most; beyond it the oldest finished ones are forgotten. */
  maxRuns: number;
  /** postgres: secret reference (environment variable or secret file) holding the connection URL. */
  urlEnv?: string;
  /**
   * postgres: how long an instance may go without a heartbeat before another instance takes its
   * runs over (default 60 s).
   */
  claimTimeoutMs: number;
}

/**
 * `server.staging`: where accepted bundles wait until a worker of any instance runs them: a
 * directory on a filesystem every instance mounts at the same path, or an S3 bucket/prefix. Being
 * shared, its start-up clean-up removes only data older than a grace period that no live run owns.
 */
export type StagingConfig = LocalLocation | S3Location;

/** `server.uploads`: resumable (tus) uploads, docs/integrations/http-upload.md. */
export interface ResumableUploadsConfig {
  /** How long a partial upload is kept after its last bytes arrived (default 24 h). */
  partialTtlMs: number;
  /** Partial uploads one token may hold at once (default 4). */
  maxPartialsPerToken: number;
}

export interface HttpServerConfig {
  /** `host:port` (`[v6]:port` for IPv6); port 0 asks the system for a free port. */
  listen: string;
  /** How long finished upload status records are kept. */
  retentionMs: number;
  /** Accepted uploads waiting for a worker; beyond it the server answers 503. */
  queueSize: number;
  /** Runs executed at the same time. */
  workers: number;
  /** Absolute directory where uploads are staged and extracted. */
  stagingDirectory: string;
}

export interface SecretsConfig {
  /** Absolute directory holding one file per secret reference; absent when not configured. */
  directory?: string;
}

export interface UploadTokenConfig {
  id: string;
  /** Secret reference holding the bearer token (see `resolveSecret`). */
  tokenEnv: string;
  /** Ids of `http_upload` pipelines this token may upload to. */
  allowPipelines: string[];
}

export interface PipelineConfig {
  id: string;
  source: SourceConfig;
  validation: ValidationPolicy;
  destinations: DestinationConfig[];
}

export type Backend = StorageLocation["backend"];
export type SourceBackend = SourceConfig["backend"];

/** Where a storage backend is rooted; `backend` discriminates. */
export type StorageLocation = LocalLocation | SshLocation | S3Location;
export type SourceConfig = (StorageLocation | HttpUploadSource) & SourceTrust;

/** What a source's bundles must carry besides a valid manifest; any backend may set it. */
export interface SourceTrust {
  /** `source.signatures`: absent when bundles need no signature (one present is not checked). */
  signatures?: SignatureConfig;
}

/** `source.signatures` (docs/integrations/signed-bundles.md): bundles signed with `ssh-keygen -Y sign` by allowed signers. */
export interface SignatureConfig {
  /** Refuse a bundle without `manifest.json.sig` (default true); a present one is always checked. */
  required: boolean;
  /** Absolute path of the OpenSSH allowed_signers file, read when bundles are checked. */
  allowedSigners: string;
  /** The SSHSIG namespace signatures are made in; default `distributor`. */
  namespace: string;
}

export interface LocalLocation {
  backend: "local";
  /** Absolute directory. */
  path: string;
  /**
   * Destinations only: flush every written file to disk (default true). False flushes only the
   * state and lease files, trading durability after a power cut for speed.
   */
  fsync?: boolean;
}

export type HostKeyPolicy = "strict" | "accept_new";

export interface SshLocation {
  backend: "ssh";
  host: string;
  port: number;
  user: string;
  /** Root directory on the server (a relative path is relative to the login directory). */
  path: string;
  /** Absolute path of a private key file on this machine. */
  privateKeyFile?: string;
  /** Secret reference holding a private key. */
  privateKeyEnv?: string;
  /** Secret reference holding the private key's passphrase. */
  passphraseEnv?: string;
  /** Secret reference holding a password. */
  passwordEnv?: string;
  /** Absolute path of the known_hosts file. */
  knownHostsFile: string;
  hostKeyPolicy: HostKeyPolicy;
  /** Destinations only: as `LocalLocation.fsync`, with `fsync@openssh.com`. */
  fsync?: boolean;
  timeouts?: RemoteTimeouts;
}

/**
 * Bounded waits of a remote location (docs/design/commit-protocol.md): each absent one is the adapter's default
 * (connect 10 s; request 30 s without an answer or progress).
 */
export interface RemoteTimeouts {
  connectMs?: number;
  requestMs?: number;
}

export interface S3Location {
  backend: "s3";
  bucket: string;
  /** Logical prefix inside the bucket; `""` is the bucket root. */
  prefix: string;
  region: string;
  /** Absolute http(s) URL of an S3-compatible service; absent for AWS. */
  endpoint?: string;
  forcePathStyle: boolean;
  /** Absent: the SDK's default credential chain. */
  credentials?: S3Credentials;
  timeouts?: RemoteTimeouts;
  /** Destinations only: how objects larger than one part are uploaded. */
  multipart?: S3Multipart;
}

export interface S3Multipart {
  /** Bytes per part (5 MiB to 5 GiB); objects up to one part are a single PUT. */
  partSize?: number;
  /** Parts of one object uploaded at once. */
  concurrency?: number;
}

export interface S3Credentials {
  /** Secret reference holding the access key id. */
  accessKeyIdEnv: string;
  /** Secret reference holding the secret access key. */
  secretAccessKeyEnv: string;
}

export interface HttpUploadSource {
  backend: "http_upload";
  /** Largest accepted request body, in bytes. */
  maxUploadSize: number;
}

export type UnlistedFilesPolicy = "reject" | "ignore";

export interface ValidationPolicy {
  unlistedFiles: UnlistedFilesPolicy;
  maxFiles: number;
  /** Bytes. */
  maxTotalSize: number;
  /**
   * `validation.portable_names`: refuse bundles with names that are one name on case-insensitive
   * or normalising stores (case-only and NFC/NFD twins). False (the default) only warns.
   */
  portableNames: boolean;
}

export interface DestinationConfig {
  id: string;
  location: StorageLocation;
  publish: PublishPolicy;
  transform: TransformPolicy;
  pathMapping: PathMappingPolicy;
  /** Absent when the destination records no URLs. */
  links?: LinksPolicy;
  state: StatePolicy;
  reconciliation: ReconciliationPolicy;
  retention: RetentionPolicy;
  transfer: TransferPolicy;
  /**
   * Object metadata rules, in order (the first whose `match` fits an output's path below the
   * destination root decides); empty when none are configured. Only the s3 backend allows them.
   */
  metadata: MetadataRule[];
  /**
   * Outputs written at once; absent, the backend's own default (local 16, ssh 8, s3 4). Each
   * write holds at most one read chunk, or for an S3 multipart upload its parts in flight, so
   * memory grows with this number, never with file sizes.
   */
  transfers?: number;
  /**
   * `max_deletes`: the most managed outputs one publication may delete (a count, or a percentage
   * of the owner's managed outputs); a plan that would delete more is refused
   * (`too_many_deletes`) unless `--allow-deletes` allows that many. Absent: no limit.
   */
  maxDeletes?: number | { percent: number };
  /**
   * `max_state_size`, in bytes: the largest state file a run writes at this destination, and the
   * largest it reads back. Default: the larger of 64 MiB and 1 KiB × `validation.max_files`.
   */
  maxStateSize: number;
  /**
   * `max_entries`: the most entries one listing of this destination may return (planning's
   * listing of a bundle path, recovery, audit, prune, adopt...). Default 10 000 000.
   */
  maxEntries: number;
  /**
   * `layout`: `in_place` (the default) writes outputs directly below the bundle path;
   * `releases` (local and ssh) builds each publication in `releases/<id>/` and switches the
   * `current` symlink to it; `releases.keep` committed releases stay for rollback.
   */
  layout: { mode: "in_place" } | ReleasesLayout;
}

/**
 * `layout: releases` and its `releases` settings (docs/config.md): `keep` committed releases;
 * `promote: manual` stages every run's release instead of making it live; `previewUrl` (with
 * `{release}`) says where a staged release can be looked at; `keepStaged` bounds how many staged
 * releases retention keeps (every one newer than the live release when absent).
 */
export interface ReleasesLayout {
  mode: "releases";
  keep: number;
  promote: "auto" | "manual";
  previewUrl?: string;
  keepStaged?: number;
}

export interface PublishPolicy {
  source: boolean;
  html: boolean;
}

export type TransformMode = "sidecar" | "index";

export interface TransformPolicy {
  markdownToHtml: MarkdownToHtmlTransform;
}

export interface MarkdownToHtmlTransform {
  enabled: boolean;
  mode: TransformMode;
}

export type PathMappingMode = "preserve_relative" | "fixed";

export interface PathMappingPolicy {
  mode: PathMappingMode;
}

export type LinkPrimary = "html" | "source" | "auto" | "none";

export interface LinksPolicy {
  /** Absolute http(s) URL, always ending in `/` (it is treated as a directory). */
  baseUrl: string;
  primary: LinkPrimary;
}

export type StateMode = "single_owner" | "shared_root";

export interface StatePolicy {
  mode: StateMode;
}

export type ReconciliationMode = "replace" | "merge";

export interface ReconciliationPolicy {
  mode: ReconciliationMode;
}

export interface RetentionPolicy {
  prune: PrunePolicy;
}

export interface PrunePolicy {
  enabled: boolean;
  /** Managed outputs updated longer ago than this are eligible; absent when not configured. */
  olderThanMs?: number;
  /** This many newest managed outputs are always kept; absent when not configured. */
  keepLatest?: number;
}
