import { createHash } from "node:crypto";
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { DEFAULT_RELEASES_KEPT, type MetadataRule } from "@distributor/engine";
import type { RawConfig, RawDestination, RawPipeline, RawSource } from "./schema.js";
import { MAX_STATE_SIZE } from "./schema-fields.js";
import type {
  Config,
  DestinationConfig,
  PipelineConfig,
  RemoteTimeouts,
  SourceConfig,
  StagingConfig,
  StorageLocation,
  UploadTokenConfig,
} from "./types.js";

/** Every value the configuration takes when a key is left out (docs/config.md). */
export const CONFIG_DEFAULTS = Object.freeze({
  listen: "127.0.0.1:8080",
  retentionMs: 24 * 60 * 60 * 1000,
  queueSize: 16,
  workers: 2,
  /** Below the service's own directory (`serviceDirectoryName`) in the state directory. */
  stagingDirectoryName: "staging",
  storeBackend: "embedded",
  /** Appended to a configured staging directory's path: the store sits beside it. */
  storePathSuffix: ".store",
  /** Below the service's own directory, beside the default staging directory. */
  storeDirectoryName: "store",
  maxRuns: 10_000,
  claimTimeoutMs: 60_000,
  /**
   * A partial upload is kept a day after its last bytes arrived: long enough for a producer's CI
   * job to be re-run the next morning, short enough that abandoned ones do not fill the disk.
   */
  partialTtlMs: 24 * 60 * 60 * 1000,
  maxPartialsPerToken: 4,
  fsync: true,
  maxUploadSize: 64 * 1024 ** 2,
  signaturesRequired: true,
  signatureNamespace: "distributor",
  unlistedFiles: "reject",
  maxFiles: 10_000,
  /** `max_state_size` left out: this much per file `validation.max_files` allows, ... */
  stateSizePerFile: 1024,
  /** ... and at least this (`defaultMaxStateSize`). */
  minDefaultStateSize: 64 * 1024 ** 2,
  maxEntries: 10_000_000,
  maxTotalSize: 10 * 1000 ** 3,
  portableNames: false,
  publishSource: true,
  publishHtml: false,
  transformEnabled: false,
  transformMode: "sidecar",
  pathMapping: "preserve_relative",
  linkPrimary: "auto",
  stateMode: "single_owner",
  reconciliationMode: "replace",
  pruneEnabled: false,
  onDestinationSame: "skip",
  onDestinationOlder: "replace",
  onDestinationNewer: "skip",
  onConflict: "fail",
  s3Region: "us-east-1",
  s3Prefix: "",
  s3ForcePathStyle: false,
  sshPort: 22,
  knownHostsFile: "~/.ssh/known_hosts",
  hostKeyPolicy: "strict",
} as const);

export interface DefaultsOptions {
  sourceName: string;
  /** Directory relative local paths resolve against. */
  cwd: string;
  /** `HOME` expands a leading `~/`; falls back to the account's home directory. */
  env: NodeJS.ProcessEnv;
}

/**
 * Turns a validated document into the normalised `Config`: defaults filled in, names camelCased,
 * local paths made absolute. Call only after `validateConfig` found no problem.
 */
export function applyDefaults(raw: RawConfig, options: DefaultsOptions): Config {
  const files = new LocalPaths(options.cwd, options.env.HOME || homedir());
  const http = raw.server?.http;
  const store = raw.server?.store;
  const secretsDirectory = raw.secrets?.directory;
  const configFile = resolve(options.cwd, options.sourceName);
  const service = raw.server?.name ?? `config:${configFile}`;
  // The default staging area and store are the configuration file's own, in a state directory
  // that survives a reboot (docs/integrations/http-upload.md, "Where uploads wait"): two files
  // that name one service still keep apart what each accepted.
  const serveRoot = join(stateHome(options.env, files), "distributor", "serve");
  const serviceDirectory = join(serveRoot, serviceDirectoryName(service, `config:${configFile}`));
  // Earlier versions keyed a named service's directory by its name alone, shared by every file
  // that named it: `serve` warns while one is left there, since its queued uploads run only
  // where a `serve` opens that store.
  const earlierDirectory =
    raw.server?.name !== undefined &&
    http?.staging_directory === undefined &&
    store?.path === undefined
      ? join(serveRoot, serviceDirectoryName(service, service))
      : undefined;
  const stagingDirectory = files.resolve(
    http?.staging_directory ?? join(serviceDirectory, CONFIG_DEFAULTS.stagingDirectoryName),
  );
  return {
    sourceName: options.sourceName,
    server: {
      service,
      configFile,
      ...(earlierDirectory === undefined ? {} : { earlierDirectory }),
      metrics: { public: raw.server?.metrics?.public ?? false },
      log: { level: raw.server?.log?.level ?? "info" },
      http: {
        listen: http?.listen ?? CONFIG_DEFAULTS.listen,
        retentionMs: http?.retention ?? CONFIG_DEFAULTS.retentionMs,
        queueSize: http?.queue_size ?? CONFIG_DEFAULTS.queueSize,
        workers: http?.workers ?? CONFIG_DEFAULTS.workers,
        stagingDirectory,
      },
      uploads: {
        partialTtlMs: raw.server?.uploads?.partial_ttl ?? CONFIG_DEFAULTS.partialTtlMs,
        maxPartialsPerToken:
          raw.server?.uploads?.max_partials_per_token ?? CONFIG_DEFAULTS.maxPartialsPerToken,
      },
      store: {
        backend: store?.backend ?? CONFIG_DEFAULTS.storeBackend,
        path:
          store?.path !== undefined
            ? files.resolve(store.path)
            : http?.staging_directory !== undefined
              ? `${stagingDirectory.replace(/\/+$/, "")}${CONFIG_DEFAULTS.storePathSuffix}`
              : join(serviceDirectory, CONFIG_DEFAULTS.storeDirectoryName),
        maxRuns: store?.max_runs ?? CONFIG_DEFAULTS.maxRuns,
        ...(store?.url_env === undefined ? {} : { urlEnv: store.url_env }),
        claimTimeoutMs: store?.claim_timeout ?? CONFIG_DEFAULTS.claimTimeoutMs,
      },
      ...(raw.server?.staging === undefined
        ? {}
        : {
            staging: storageLocation(
              { ...raw.server.staging, backend: present(raw.server.staging.backend) },
              files,
            ) as StagingConfig,
          }),
    },
    secrets: secretsDirectory === undefined ? {} : { directory: files.resolve(secretsDirectory) },
    uploadTokens: (raw.upload_tokens ?? []).map(
      (token): UploadTokenConfig => ({
        id: present(token.id),
        tokenEnv: present(token.token_env),
        allowPipelines: [...present(token.allow_pipelines)],
      }),
    ),
    pipelines: present(raw.pipelines).map((pipeline) => pipelineConfig(pipeline, files)),
  };
}

function pipelineConfig(raw: RawPipeline, files: LocalPaths): PipelineConfig {
  const maxFiles = raw.validation?.max_files ?? CONFIG_DEFAULTS.maxFiles;
  return {
    id: present(raw.id),
    source: sourceConfig(present(raw.source), files),
    validation: {
      unlistedFiles: raw.validation?.unlisted_files ?? CONFIG_DEFAULTS.unlistedFiles,
      maxFiles,
      maxTotalSize: raw.validation?.max_total_size ?? CONFIG_DEFAULTS.maxTotalSize,
      portableNames: raw.validation?.portable_names ?? CONFIG_DEFAULTS.portableNames,
    },
    destinations: present(raw.destinations).map((destination) =>
      destinationConfig(destination, files, maxFiles),
    ),
  };
}

function sourceConfig(raw: RawSource, files: LocalPaths): SourceConfig {
  const signatures = raw.signatures;
  // Absent, not defaulted: a source without the key configures exactly what it did before.
  const trust =
    signatures === undefined
      ? {}
      : {
          signatures: {
            required: signatures.required ?? CONFIG_DEFAULTS.signaturesRequired,
            allowedSigners: files.resolve(present(signatures.allowed_signers)),
            namespace: signatures.namespace ?? CONFIG_DEFAULTS.signatureNamespace,
          },
        };
  if (raw.backend === "http_upload") {
    return {
      backend: "http_upload",
      maxUploadSize: raw.max_upload_size ?? CONFIG_DEFAULTS.maxUploadSize,
      ...trust,
    };
  }
  const { signatures: _, ...location } = raw;
  return { ...storageLocation({ ...location, backend: present(raw.backend) }, files), ...trust };
}

type RawLocation = Omit<RawDestination, "backend"> & { backend: StorageLocation["backend"] };

function storageLocation(raw: RawLocation, files: LocalPaths): StorageLocation {
  switch (raw.backend) {
    case "local":
      return { backend: "local", path: files.resolve(present(raw.path)) };
    case "ssh":
      return {
        backend: "ssh",
        host: present(raw.host),
        port: raw.port ?? CONFIG_DEFAULTS.sshPort,
        user: present(raw.user),
        path: present(raw.path),
        ...(raw.private_key_file === undefined
          ? {}
          : { privateKeyFile: files.resolve(raw.private_key_file) }),
        ...(raw.private_key_env === undefined ? {} : { privateKeyEnv: raw.private_key_env }),
        ...(raw.passphrase_env === undefined ? {} : { passphraseEnv: raw.passphrase_env }),
        ...(raw.password_env === undefined ? {} : { passwordEnv: raw.password_env }),
        knownHostsFile: files.resolve(raw.known_hosts_file ?? CONFIG_DEFAULTS.knownHostsFile),
        hostKeyPolicy: raw.host_key_policy ?? CONFIG_DEFAULTS.hostKeyPolicy,
        ...remoteTimeouts(raw.timeouts),
      };
    case "s3": {
      const credentials = raw.credentials;
      return {
        backend: "s3",
        bucket: present(raw.bucket),
        prefix: raw.prefix ?? CONFIG_DEFAULTS.s3Prefix,
        region: raw.region ?? CONFIG_DEFAULTS.s3Region,
        ...(raw.endpoint === undefined ? {} : { endpoint: raw.endpoint }),
        forcePathStyle: raw.force_path_style ?? CONFIG_DEFAULTS.s3ForcePathStyle,
        ...remoteTimeouts(raw.timeouts),
        ...(credentials === undefined
          ? {}
          : {
              credentials: {
                accessKeyIdEnv: present(credentials.access_key_id_env),
                secretAccessKeyEnv: present(credentials.secret_access_key_env),
              },
            }),
      };
    }
  }
}

/** A destination's location: a local or SSH one also says whether every write is flushed. */
function destinationLocation(raw: RawDestination, files: LocalPaths): StorageLocation {
  const location = storageLocation({ ...raw, backend: present(raw.backend) }, files);
  if (location.backend === "s3") {
    const multipart = raw.multipart;
    if (multipart === undefined) return location;
    return {
      ...location,
      multipart: {
        ...(multipart.part_size === undefined ? {} : { partSize: multipart.part_size }),
        ...(multipart.concurrency === undefined ? {} : { concurrency: multipart.concurrency }),
      },
    };
  }
  return { ...location, fsync: raw.fsync ?? CONFIG_DEFAULTS.fsync };
}

/**
 * `max_state_size` left out: room for the state of as many outputs as `validation.max_files`
 * admits (about 400 bytes each with short paths; 1 KiB leaves room for long ones), never less than
 * 64 MiB, and never more than a state file that can be read back.
 */
export function defaultMaxStateSize(maxFiles: number): number {
  return Math.min(
    MAX_STATE_SIZE,
    Math.max(CONFIG_DEFAULTS.minDefaultStateSize, CONFIG_DEFAULTS.stateSizePerFile * maxFiles),
  );
}

function destinationConfig(
  raw: RawDestination,
  files: LocalPaths,
  maxFiles: number,
): DestinationConfig {
  const markdown = raw.transform?.markdown_to_html;
  const prune = raw.retention?.prune;
  const transfer = raw.transfer;
  return {
    id: present(raw.id),
    location: destinationLocation(raw, files),
    publish: {
      source: raw.publish?.source ?? CONFIG_DEFAULTS.publishSource,
      html: raw.publish?.html ?? CONFIG_DEFAULTS.publishHtml,
    },
    transform: {
      markdownToHtml: {
        enabled: markdown?.enabled ?? CONFIG_DEFAULTS.transformEnabled,
        mode: markdown?.mode ?? CONFIG_DEFAULTS.transformMode,
      },
    },
    pathMapping: { mode: raw.path_mapping?.mode ?? CONFIG_DEFAULTS.pathMapping },
    ...(raw.links === undefined
      ? {}
      : {
          links: {
            baseUrl: directoryUrl(present(raw.links.base_url)),
            primary: raw.links.primary ?? CONFIG_DEFAULTS.linkPrimary,
          },
        }),
    state: { mode: raw.state?.mode ?? CONFIG_DEFAULTS.stateMode },
    reconciliation: { mode: raw.reconciliation?.mode ?? CONFIG_DEFAULTS.reconciliationMode },
    retention: {
      prune: {
        enabled: prune?.enabled ?? CONFIG_DEFAULTS.pruneEnabled,
        ...(prune?.older_than === undefined ? {} : { olderThanMs: prune.older_than }),
        ...(prune?.keep_latest === undefined ? {} : { keepLatest: prune.keep_latest }),
      },
    },
    transfer: {
      onDestinationSame: transfer?.on_destination_same ?? CONFIG_DEFAULTS.onDestinationSame,
      onDestinationOlder: transfer?.on_destination_older ?? CONFIG_DEFAULTS.onDestinationOlder,
      onDestinationNewer: transfer?.on_destination_newer ?? CONFIG_DEFAULTS.onDestinationNewer,
      onConflict: transfer?.on_conflict ?? CONFIG_DEFAULTS.onConflict,
    },
    metadata: (raw.metadata ?? []).map(metadataRule),
    ...(raw.transfers === undefined ? {} : { transfers: raw.transfers }),
    ...(raw.max_deletes === undefined ? {} : { maxDeletes: raw.max_deletes }),
    maxStateSize: raw.max_state_size ?? defaultMaxStateSize(maxFiles),
    maxEntries: raw.max_entries ?? CONFIG_DEFAULTS.maxEntries,
    layout:
      raw.layout === "releases"
        ? {
            mode: "releases",
            keep: raw.releases?.keep ?? DEFAULT_RELEASES_KEPT,
            promote: raw.releases?.promote ?? "auto",
            ...(raw.releases?.preview_url === undefined
              ? {}
              : { previewUrl: raw.releases.preview_url }),
            ...(raw.releases?.keep_staged === undefined
              ? {}
              : { keepStaged: raw.releases.keep_staged }),
          }
        : { mode: "in_place" },
  };
}

function metadataRule(raw: NonNullable<RawDestination["metadata"]>[number]): MetadataRule {
  const rule: MetadataRule = { match: present(raw.match) };
  if (raw.cache_control !== undefined) rule.cacheControl = raw.cache_control;
  if (raw.content_type !== undefined) rule.contentType = raw.content_type;
  if (raw.content_disposition !== undefined) rule.contentDisposition = raw.content_disposition;
  if (raw.content_encoding !== undefined) rule.contentEncoding = raw.content_encoding;
  return rule;
}

/** The base URL is a directory: outputs are joined below it, never beside it. */
function directoryUrl(url: string): string {
  return url.endsWith("/") ? url : `${url}/`;
}

/** Resolves paths on this machine: `~/` against the home directory, relative ones against cwd. */
class LocalPaths {
  constructor(
    private readonly cwd: string,
    private readonly home: string,
  ) {}

  resolve(path: string): string {
    if (path === "~") return this.home;
    if (path.startsWith("~/")) return join(this.home, path.slice(2));
    return isAbsolute(path) ? resolve(path) : resolve(this.cwd, path);
  }
}

/** Required keys were checked by validateConfig; reaching a missing one is a bug. */
function present<T>(value: T | undefined): T {
  if (value === undefined) throw new Error("configuration was not validated before defaults");
  return value;
}

function remoteTimeouts(
  raw: { connect?: number | undefined; request?: number | undefined } | undefined,
): { timeouts?: RemoteTimeouts } {
  if (raw === undefined) return {};
  return {
    timeouts: {
      ...(raw.connect === undefined ? {} : { connectMs: raw.connect }),
      ...(raw.request === undefined ? {} : { requestMs: raw.request }),
    },
  };
}

/** `$XDG_STATE_HOME`, else `~/.local/state` (the XDG base directory default). */
function stateHome(env: NodeJS.ProcessEnv, files: LocalPaths): string {
  const configured = env.XDG_STATE_HOME;
  return configured !== undefined && isAbsolute(configured)
    ? configured
    : files.resolve("~/.local/state");
}

/**
 * A directory name for a configuration file's service: a readable slug of the service's name and
 * 12 hex digits of the digest of `identity` (`config:<file>`), so two files never share one
 * (whatever service they name) and an operator can tell which is whose. A file without
 * `server.name` keeps the name earlier versions gave it.
 */
function serviceDirectoryName(service: string, identity: string): string {
  const slug = service
    .replace(/^config:/, "")
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^[-.]+|-+$/g, "")
    .slice(-48);
  const digest = createHash("sha256").update(identity).digest("hex").slice(0, 12);
  return `${slug === "" ? "service" : slug}-${digest}`;
}
