import * as v from "valibot";
import {
  choice,
  deleteLimit,
  duration,
  flag,
  glob,
  headerValue,
  httpUrl,
  id,
  integer,
  jsonSchema,
  list,
  listenAddress,
  literalSecret,
  MAX_PART_CONCURRENCY,
  MAX_PART_SIZE,
  MAX_RELEASES_KEPT,
  MAX_TRANSFERS,
  MIN_PART_SIZE,
  mapping,
  orList,
  previewUrl,
  s3Prefix,
  secretName,
  size,
  stateSize,
  text,
} from "./schema-fields.js";

/*
 * The shape of the YAML document: every key, its type and its allowed values. Every key is
 * optional here; which keys are required (often depending on the backend) and every rule that
 * relates two keys lives in validate.ts, so that one broken value never hides the other problems.
 * Durations come out as milliseconds and sizes as bytes.
 *
 * Rules written as code (`rawCheck`, `rawTransform`, `check`) carry their JSON Schema equivalent in
 * a `jsonSchema(...)` metadata entry beside them, from which the published config-schema.json is
 * generated; where JSON Schema can only approximate a rule, the fragment says so.
 */

export const SOURCE_BACKENDS = ["local", "ssh", "s3", "http_upload"] as const;
export const DESTINATION_BACKENDS = ["local", "ssh", "s3"] as const;

/** Backend keys shared by sources and destinations; validate.ts checks which backend allows them. */
const locationEntries = {
  path: v.optional(text()),
  host: v.optional(
    v.pipe(text(), v.regex(/^[^\s/]+$/, "must be a host name or address without spaces or /")),
  ),
  port: v.optional(integer(1, "must be between 1 and 65535", 65_535)),
  user: v.optional(text()),
  private_key_file: v.optional(text()),
  private_key_env: v.optional(secretName()),
  passphrase_env: v.optional(secretName()),
  password_env: v.optional(secretName()),
  known_hosts_file: v.optional(text()),
  host_key_policy: v.optional(choice(["strict", "accept_new"])),
  bucket: v.optional(
    v.pipe(text(), v.regex(/^[^\s/]+$/, "must be a bucket name without / or spaces")),
  ),
  prefix: v.optional(s3Prefix()),
  region: v.optional(text()),
  endpoint: v.optional(httpUrl()),
  force_path_style: v.optional(flag()),
  /** Bounded waits (docs/design/commit-protocol.md): how long to wait for a connection and for an answer. */
  timeouts: v.optional(
    mapping({
      connect: v.optional(duration()),
      request: v.optional(duration()),
    }),
  ),
  credentials: v.optional(
    mapping({
      access_key_id_env: v.optional(secretName()),
      secret_access_key_env: v.optional(secretName()),
      access_key_id: literalSecret("access_key_id_env", "an access key id"),
      secret_access_key: literalSecret("secret_access_key_env", "a secret access key"),
    }),
  ),
  password: literalSecret("password_env", "a password"),
  passphrase: literalSecret("passphrase_env", "a passphrase"),
  private_key: literalSecret("private_key_env or private_key_file", "a private key"),
};

export const sourceSchema = mapping({
  backend: v.optional(choice(SOURCE_BACKENDS)),
  ...locationEntries,
  max_upload_size: v.optional(size()),
  /** Which producers' bundles this source accepts (docs/integrations/http-upload.md); any backend. */
  signatures: v.optional(
    mapping({
      required: v.optional(flag()),
      allowed_signers: v.optional(text()),
      namespace: v.optional(text()),
    }),
  ),
});

export const destinationSchema = mapping({
  id: v.optional(id()),
  backend: v.optional(
    v.picklist(DESTINATION_BACKENDS, (issue) =>
      issue.input === "http_upload"
        ? `must be ${orList(DESTINATION_BACKENDS)} (http_upload is valid only as a source)`
        : `must be ${orList(DESTINATION_BACKENDS)}`,
    ),
  ),
  ...locationEntries,
  fsync: v.optional(flag()),
  publish: v.optional(mapping({ source: v.optional(flag()), html: v.optional(flag()) })),
  transform: v.optional(
    mapping({
      markdown_to_html: v.optional(
        mapping({
          enabled: v.optional(flag()),
          mode: v.optional(choice(["sidecar", "index"])),
        }),
      ),
    }),
  ),
  path_mapping: v.optional(mapping({ mode: v.optional(choice(["preserve_relative", "fixed"])) })),
  links: v.optional(
    mapping({
      base_url: v.optional(httpUrl({ bare: true })),
      primary: v.optional(choice(["html", "source", "auto", "none"])),
    }),
  ),
  state: v.optional(mapping({ mode: v.optional(choice(["single_owner", "shared_root"])) })),
  reconciliation: v.optional(mapping({ mode: v.optional(choice(["replace", "merge"])) })),
  retention: v.optional(
    mapping({
      prune: v.optional(
        mapping({
          enabled: v.optional(flag()),
          older_than: v.optional(duration()),
          keep_latest: v.optional(integer(0, "must be zero or greater")),
        }),
      ),
    }),
  ),
  /** s3 only: how large objects are uploaded in parts. */
  multipart: v.optional(
    mapping({
      part_size: v.optional(
        v.pipe(
          size(),
          v.rawCheck(({ dataset, addIssue }) => {
            if (!dataset.typed) return;
            if (dataset.value < MIN_PART_SIZE) addIssue({ message: "must be at least 5MiB" });
            else if (dataset.value > MAX_PART_SIZE) addIssue({ message: "must be at most 5GiB" });
          }),
          // A size is a string with a unit: its bounds are approximated by the description.
          jsonSchema({ $comment: "between 5MiB and 5GiB" }),
        ),
      ),
      concurrency: v.optional(integer(1, "must be greater than zero", MAX_PART_CONCURRENCY)),
    }),
  ),
  /** Outputs written at once (the backend's default when absent). */
  transfers: v.optional(integer(1, "must be greater than zero", MAX_TRANSFERS)),
  /** local and ssh only: `releases` publishes each bundle path as releases behind a `current` link. */
  layout: v.optional(choice(["in_place", "releases"])),
  releases: v.optional(
    mapping({
      keep: v.optional(integer(1, "must be at least 1", MAX_RELEASES_KEPT)),
      /** `manual`: every run stages its release; `distributor promote` makes it live. */
      promote: v.optional(choice(["auto", "manual"])),
      /** Where a staged release can be looked at: a URL with `{release}` for its id. */
      preview_url: v.optional(previewUrl()),
      /** Staged releases retention keeps (default: every one newer than the live release). */
      keep_staged: v.optional(integer(0, "must be zero or greater", MAX_RELEASES_KEPT)),
    }),
  ),
  max_deletes: v.optional(deleteLimit()),
  /** The largest state file a run writes or reads back at this destination. */
  max_state_size: v.optional(stateSize()),
  /** The most entries any listing of this destination may return. */
  max_entries: v.optional(integer(1, "must be greater than zero")),
  metadata: v.optional(
    list(
      mapping({
        match: v.optional(glob()),
        cache_control: v.optional(headerValue()),
        content_type: v.optional(headerValue()),
        content_disposition: v.optional(headerValue()),
        content_encoding: v.optional(choice(["gzip", "br"])),
      }),
    ),
  ),
  transfer: v.optional(
    mapping({
      on_destination_same: v.optional(choice(["skip", "fail"])),
      on_destination_older: v.optional(choice(["replace", "skip", "fail"])),
      on_destination_newer: v.optional(choice(["skip", "fail"])),
      on_conflict: v.optional(choice(["fail"])),
    }),
  ),
});

export const pipelineSchema = mapping({
  id: v.optional(id()),
  source: v.optional(sourceSchema),
  validation: v.optional(
    mapping({
      unlisted_files: v.optional(choice(["reject", "ignore"])),
      max_files: v.optional(integer(1, "must be greater than zero")),
      max_total_size: v.optional(size()),
      portable_names: v.optional(flag()),
    }),
  ),
  destinations: v.optional(list(destinationSchema)),
});

export const uploadTokenSchema = mapping({
  id: v.optional(id()),
  token_env: v.optional(secretName()),
  token: literalSecret("token_env", "upload tokens"),
  allow_pipelines: v.optional(list(v.string("must be a string"))),
});

/**
 * `server.store.backend`: `memory` forgets everything on exit (tests, embedding); `postgres` is
 * shared by several `serve` instances (its code is in `@distributor/store-postgres`).
 */
export const STORE_BACKENDS = ["embedded", "memory", "postgres"] as const;

/** `server.log.level`: the least level of the JSON lines `serve` writes. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** `server.staging.backend`: where accepted bundles wait, readable by every instance. */
export const STAGING_BACKENDS = ["local", "s3"] as const;

/** The whole configuration document. */
export const configSchema = mapping({
  server: v.optional(
    mapping({
      name: v.optional(text()),
      metrics: v.optional(mapping({ public: v.optional(flag()) })),
      log: v.optional(mapping({ level: v.optional(choice(LOG_LEVELS)) })),
      http: v.optional(
        mapping({
          listen: v.optional(listenAddress()),
          retention: v.optional(duration()),
          queue_size: v.optional(integer(1, "must be greater than zero")),
          workers: v.optional(integer(1, "must be greater than zero")),
          staging_directory: v.optional(text()),
        }),
      ),
      uploads: v.optional(
        mapping({
          partial_ttl: v.optional(duration()),
          max_partials_per_token: v.optional(integer(1, "must be greater than zero")),
        }),
      ),
      store: v.optional(
        mapping({
          backend: v.optional(choice(STORE_BACKENDS)),
          path: v.optional(text()),
          max_runs: v.optional(integer(1, "must be greater than zero")),
          url_env: v.optional(secretName()),
          url: literalSecret("url_env", "database URLs"),
          claim_timeout: v.optional(duration()),
        }),
      ),
      staging: v.optional(
        mapping({
          backend: v.optional(choice(STAGING_BACKENDS)),
          path: locationEntries.path,
          bucket: locationEntries.bucket,
          prefix: locationEntries.prefix,
          region: locationEntries.region,
          endpoint: locationEntries.endpoint,
          force_path_style: locationEntries.force_path_style,
          timeouts: locationEntries.timeouts,
          credentials: locationEntries.credentials,
        }),
      ),
    }),
  ),
  secrets: v.optional(mapping({ directory: v.optional(text()) })),
  upload_tokens: v.optional(list(uploadTokenSchema)),
  pipelines: v.optional(list(pipelineSchema)),
});

/** The document as the schema returns it: snake_case keys, nothing defaulted yet. */
export type RawConfig = v.InferOutput<typeof configSchema>;
export type RawPipeline = v.InferOutput<typeof pipelineSchema>;
export type RawSource = v.InferOutput<typeof sourceSchema>;
export type RawDestination = v.InferOutput<typeof destinationSchema>;
export type RawUploadToken = v.InferOutput<typeof uploadTokenSchema>;
