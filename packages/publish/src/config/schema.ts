import { globProblem } from "@distributor/engine";
import { pathProblem, SECRET_NAME_PATTERN } from "@distributor/storage";
import * as v from "valibot";
import { parseDuration } from "./duration.js";
import { parseSize, SIZE_UNITS } from "./size.js";

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

/** Message of the issue valibot reports for a key the schema does not know. */
export const UNKNOWN_KEY = "unknown key";

/** Message of the issue for a value that should be a mapping. */
export const NOT_A_MAPPING = "must be a mapping";

/** Pipeline, destination and upload token ids: the same rule as bundle ids (docs/design/bundles.md). */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const DURATION_HINT = "must be a duration such as 500ms, 45s, 30m, 1h30m or 168h";
const SIZE_HINT = "must be a size such as 512KiB, 64MiB or 10GB";

/**
 * The JSON Schema keywords equivalent to the code-written rule beside it. Ignored at run time;
 * read by the config-schema.json generator.
 */
function jsonSchema<TInput>(
  keywords: Record<string, unknown>,
): v.MetadataAction<TInput, Record<string, unknown>> {
  return v.metadata<TInput, Record<string, unknown>>(keywords);
}

function isMapping(input: unknown): input is Record<string, unknown> {
  return typeof input === "object" && input !== null && !Array.isArray(input);
}

/** `a or b`, `a, b or c`: the wording of every choice message. */
export function orList(options: readonly string[]): string {
  if (options.length <= 1) return options.join("");
  return `${options.slice(0, -1).join(", ")} or ${options.at(-1)}`;
}

function mapping<const TEntries extends v.ObjectEntries>(entries: TEntries) {
  // strictObject alone would take a list for a mapping with keys "0", "1", ...
  return v.pipe(
    v.custom<Record<string, unknown>>(isMapping, NOT_A_MAPPING),
    v.strictObject(entries, UNKNOWN_KEY),
  );
}

function list<const TItem extends v.GenericSchema>(item: TItem) {
  return v.array(item, "must be a list");
}

function text() {
  return v.pipe(v.string("must be a string"), v.minLength(1, "must not be empty"));
}

function flag() {
  return v.boolean("must be true or false");
}

function choice<const TOptions extends readonly [string, ...string[]]>(options: TOptions) {
  return v.picklist(options, `must be ${orList(options)}`);
}

/** The most outputs a destination may write at once (`transfers`). */
export const MAX_TRANSFERS = 64;
/** S3's bounds on a multipart part (`multipart.part_size`), and the most parts sent at once. */
export const MIN_PART_SIZE = 5 * 1024 * 1024;
export const MAX_PART_SIZE = 5 * 1024 * 1024 * 1024;
export const MAX_PART_CONCURRENCY = 16;

function integer(minimum: number, belowMinimum: string, maximum = Number.MAX_SAFE_INTEGER) {
  return v.pipe(
    v.number("must be a whole number"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const value = dataset.value;
      if (!Number.isSafeInteger(value)) addIssue({ message: "must be a whole number" });
      else if (value < minimum) addIssue({ message: belowMinimum });
      else if (value > maximum) addIssue({ message: `must be at most ${maximum}` });
    }),
    jsonSchema({ type: "integer", minimum, maximum }),
  );
}

const MAX_DELETES_HINT =
  'must be a whole number of outputs (such as 100) or a percentage of the managed outputs (such as "20%")';

/** `max_deletes: "20%"`: a percentage from 0 to 100 of the owner's managed outputs. */
function deletePercentage() {
  return v.pipe(
    v.string(MAX_DELETES_HINT),
    jsonSchema({ pattern: "^\\d+(?:\\.\\d+)?%$" }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const match = /^(\d+(?:\.\d+)?)%$/.exec(dataset.value);
      const percent = match === null ? Number.NaN : Number(match[1]);
      if (!(percent >= 0 && percent <= 100)) {
        addIssue({ message: MAX_DELETES_HINT });
        return NEVER;
      }
      return { percent };
    }),
  );
}

// A Go duration without a sign and with a non-zero digit somewhere; values too small to count
// (`0.0000001ns`) or too large for Go pass this pattern and are refused by the loader only.
const POSITIVE_DURATION_PATTERN =
  "^\\+?(?=[^1-9]*[1-9])(?:(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$";

/** A Go duration greater than zero, in milliseconds. */
function duration() {
  return v.pipe(
    v.string(DURATION_HINT),
    jsonSchema({ pattern: POSITIVE_DURATION_PATTERN }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      let milliseconds: number;
      try {
        milliseconds = parseDuration(dataset.value);
      } catch (error) {
        addIssue({ message: `${DURATION_HINT} (${(error as Error).message})` });
        return NEVER;
      }
      if (milliseconds <= 0) {
        addIssue({ message: "must be greater than zero" });
        return NEVER;
      }
      return milliseconds;
    }),
  );
}

// A size with a unit and a non-zero digit; a fraction that is not a whole number of bytes
// (`1.5B`) or a size beyond 2^53 passes this pattern and is refused by the loader only.
const POSITIVE_SIZE_PATTERN = `^(?=[^1-9]*[1-9])\\d+(?:\\.\\d+)? ?(?:${SIZE_UNITS.join("|")})$`;

/** A size greater than zero, in bytes. */
function size() {
  return v.pipe(
    v.string(SIZE_HINT),
    jsonSchema({ pattern: POSITIVE_SIZE_PATTERN }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      let bytes: number;
      try {
        bytes = parseSize(dataset.value);
      } catch (error) {
        addIssue({ message: `${SIZE_HINT} (${(error as Error).message})` });
        return NEVER;
      }
      if (bytes === 0) {
        addIssue({ message: "must be greater than zero" });
        return NEVER;
      }
      return bytes;
    }),
  );
}

function id() {
  return v.pipe(
    v.string("must be a string"),
    v.regex(
      ID_PATTERN,
      'must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit',
    ),
  );
}

function secretName() {
  return v.pipe(
    v.string("must be a string"),
    v.regex(
      SECRET_NAME_PATTERN,
      "must be an environment variable name (letters, digits and _, not starting with a digit)",
    ),
  );
}

/** A glob over destination paths (see `compileGlob`); a malformed one is refused by its key. */
function glob() {
  return v.pipe(
    v.string("must be a string"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const problem = globProblem(dataset.value);
      if (problem !== undefined) addIssue({ message: `must be a glob pattern: it ${problem}` });
    }),
    jsonSchema({ type: "string", minLength: 1 }),
  );
}

/** An HTTP header value: visible ASCII and spaces, not empty. */
function headerValue() {
  return v.pipe(
    text(),
    v.regex(
      /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/,
      "must be an HTTP header value: visible ASCII characters and inner spaces",
    ),
  );
}

/** An absolute http(s) URL without user information (it ends up in state files and reports). */
function httpUrl(options: { bare?: boolean } = {}) {
  const hint = "must be an absolute http or https URL";
  return v.pipe(
    v.string(hint),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const url = URL.canParse(dataset.value) ? new URL(dataset.value) : undefined;
      if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
        addIssue({ message: hint });
      } else if (url.username !== "" || url.password !== "") {
        addIssue({ message: "must not contain a user name or password" });
      } else if (options.bare === true && (url.search !== "" || url.hash !== "")) {
        addIssue({ message: "must not have a query or fragment" });
      }
    }),
    // Scheme and an authority without user information; the loader also parses the whole URL.
    jsonSchema({
      pattern:
        options.bare === true
          ? "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+(?:/[^?#]*)?$"
          : "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+(?:[/?#]\\S*)?$",
    }),
  );
}

/** `host:port` or `[ipv6]:port`; an empty host listens on every interface, port 0 on a free one. */
const LISTEN = /^(?:\[[0-9A-Fa-f:.]+\]|[^\s:[\]]*):(\d{1,5})$/;

function listenAddress() {
  const hint = "must be host:port, such as 127.0.0.1:8080 or [::1]:8080";
  return v.pipe(
    v.string(hint),
    v.check((value) => {
      const port = LISTEN.exec(value)?.[1];
      return port !== undefined && Number(port) <= 65_535;
    }, hint),
    jsonSchema({
      pattern:
        "^(?:\\[[0-9A-Fa-f:.]+\\]|[^\\s:[\\]]*):0*(?:6553[0-5]|655[0-2]\\d|65[0-4]\\d{2}|6[0-4]\\d{3}|[1-5]\\d{4}|\\d{1,4})$",
    }),
  );
}

function s3Prefix() {
  return v.pipe(
    v.string("must be a string"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed || dataset.value === "") return;
      const problem = pathProblem(dataset.value);
      if (problem !== undefined) {
        addIssue({ message: `must be a clean relative path such as reports/daily (${problem})` });
      }
    }),
    // docs/design/bundles.md without the 255-byte segment limit: no leading, trailing or doubled /, no . or ..
    // segment, no backslash or control character.
    jsonSchema({
      pattern: "^(?!/)(?!.*//)(?!.*/$)(?!(?:.*/)?\\.\\.?(?:/|$))[^\\\\\\u0000-\\u001f\\u007f]*$",
    }),
  );
}

/** Keys that would put a secret value in the file; each points at the reference key to use. */
function literalSecret(referenceKey: string, what: string) {
  return v.optional(
    v.never(
      `is not allowed: configuration files must not contain ${what}; store it in an environment ` +
        `variable or a file in secrets.directory and name it with ${referenceKey}`,
    ),
  );
}

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
  max_deletes: v.optional(
    v.union([integer(0, "must be zero or more"), deletePercentage()], MAX_DELETES_HINT),
  ),
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
