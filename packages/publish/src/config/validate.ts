import { posix, resolve } from "node:path";
import { CONFIG_DEFAULTS } from "./defaults.js";
import { formatKeyPath, isAtOrBelow, type KeySegment } from "./key-path.js";
import type {
  RawConfig,
  RawDestination,
  RawPipeline,
  RawSource,
  RawUploadToken,
} from "./schema.js";
import type { SourceBackend } from "./types.js";

type Path = readonly KeySegment[];

/** The backends each backend-specific key belongs to (docs/design/storage-backends.md). */
export const BACKEND_KEYS: Readonly<Record<string, readonly SourceBackend[]>> = {
  path: ["local", "ssh"],
  host: ["ssh"],
  port: ["ssh"],
  user: ["ssh"],
  private_key_file: ["ssh"],
  private_key_env: ["ssh"],
  passphrase_env: ["ssh"],
  password_env: ["ssh"],
  known_hosts_file: ["ssh"],
  host_key_policy: ["ssh"],
  bucket: ["s3"],
  prefix: ["s3"],
  region: ["s3"],
  endpoint: ["s3"],
  force_path_style: ["s3"],
  timeouts: ["ssh", "s3"],
  credentials: ["s3"],
  max_upload_size: ["http_upload"],
  fsync: ["local", "ssh"],
};

export const REQUIRED_KEYS: Readonly<Record<SourceBackend, readonly string[]>> = {
  local: ["path"],
  ssh: ["host", "user", "path"],
  s3: ["bucket"],
  http_upload: [],
};

/**
 * Checks every rule that the schema cannot express on its own: required keys, uniqueness,
 * backend-specific keys and relations between keys. Returns every problem found, each starting
 * with its key path. `broken` lists key paths the schema already reported; rules that would
 * only repeat or guess at those stay quiet.
 */
export function validateConfig(raw: RawConfig, broken: readonly string[] = []): string[] {
  const problems = new Problems(broken);
  const pipelines = raw.pipelines ?? [];
  if (pipelines.length === 0) problems.add(["pipelines"], "must list at least one pipeline");
  checkUnique(
    problems,
    pipelines.map((pipeline, index) => ({ id: pipeline.id, path: ["pipelines", index] })),
  );
  pipelines.forEach((pipeline, index) => {
    checkPipeline(problems, pipeline, ["pipelines", index]);
  });
  checkSharedLocations(problems, pipelines);
  checkUploadTokens(problems, raw);
  checkServerStore(problems, raw);
  return problems.list;
}

/**
 * `server.store` keys belong to one backend each, and a store shared by several instances needs
 * staging they all read: a bundle staged in one instance's private directory could not be run by
 * another, and each start would take the others' runs for lost.
 */
function checkServerStore(problems: Problems, raw: RawConfig): void {
  const store = raw.server?.store;
  const staging = raw.server?.staging;
  const backend = store?.backend ?? "embedded";
  if (problems.removed(["server", "store", "backend"])) return;
  if (backend === "postgres") {
    if (store?.url_env === undefined && !problems.removed(["server", "store", "url_env"])) {
      problems.add(["server", "store", "url_env"], "is required when backend is postgres");
    }
    if (store?.path !== undefined) {
      problems.add(["server", "store", "path"], "is only valid when backend is embedded");
    }
    if (staging === undefined && !problems.removed(["server", "staging"])) {
      problems.add(
        ["server", "staging"],
        "is required when server.store.backend is postgres: every instance must read the bundles another accepted",
      );
    }
  } else {
    for (const key of ["url_env", "claim_timeout"] as const) {
      if (store?.[key] !== undefined) {
        problems.add(["server", "store", key], "is only valid when backend is postgres");
      }
    }
  }
  if (staging !== undefined && !problems.removed(["server", "staging", "backend"])) {
    checkLocation(problems, staging, ["server", "staging"]);
  }
}

/**
 * Two destinations (of any pipelines) that resolve to the same location would both claim its
 * single-owner state, and every real run after the first would fail as a conflict: only
 * `state.mode: shared_root` on both lets them share it. Locations compare by backend, then
 * host and port or bucket and endpoint, then the normalised path or prefix.
 */
function checkSharedLocations(problems: Problems, pipelines: readonly RawPipeline[]): void {
  const seen = new Map<string, { path: Path; shared: boolean }>();
  pipelines.forEach((pipeline, p) => {
    (pipeline.destinations ?? []).forEach((destination, d) => {
      const path: Path = ["pipelines", p, "destinations", d];
      if (!problems.intact(path)) return;
      const key = locationKey(destination);
      if (key === undefined) return;
      const shared = destination.state?.mode === "shared_root";
      const first = seen.get(key.id);
      if (first === undefined) {
        seen.set(key.id, { path, shared });
        return;
      }
      if (first.shared && shared) return;
      problems.add(
        path,
        `resolves to the same location as ${formatKeyPath(first.path)} (${key.shown}); two destinations may share a location only when both set state.mode: shared_root`,
      );
    });
  });
}

function locationKey(destination: RawDestination): { id: string; shown: string } | undefined {
  const clean = (text: string) => posix.normalize(`/${text}`).replace(/\/+$/, "") || "/";
  switch (destination.backend) {
    case "local":
      if (typeof destination.path !== "string") return undefined;
      return {
        id: `local ${resolve(destination.path)}`,
        shown: `local ${resolve(destination.path)}`,
      };
    case "ssh": {
      if (typeof destination.host !== "string" || typeof destination.path !== "string") {
        return undefined;
      }
      const host = `${destination.host.toLowerCase()}:${destination.port ?? 22}`;
      return {
        id: `ssh ${host} ${clean(destination.path)}`,
        shown: `ssh ${host}${clean(destination.path)}`,
      };
    }
    case "s3": {
      if (typeof destination.bucket !== "string") return undefined;
      const prefix = clean(destination.prefix ?? "");
      const endpoint = destination.endpoint ?? "";
      return {
        id: `s3 ${endpoint} ${destination.bucket} ${prefix}`,
        shown: `s3 ${destination.bucket}${prefix === "/" ? "" : prefix}`,
      };
    }
    default:
      return undefined;
  }
}

class Problems {
  readonly list: string[] = [];
  private readonly broken: readonly string[];

  constructor(broken: readonly string[]) {
    this.broken = broken;
  }

  add(path: Path, message: string): void {
    const formatted = formatKeyPath(path);
    if (this.broken.some((brokenPath) => isAtOrBelow(formatted, brokenPath))) return;
    this.list.push(`${formatted} ${message}`);
  }

  /** True when `path` itself, or a key above it, was set aside as broken. */
  removed(path: Path): boolean {
    const formatted = formatKeyPath(path);
    return this.broken.some((brokenPath) => isAtOrBelow(formatted, brokenPath));
  }

  /** True when nothing at or below `path` was set aside as broken. */
  intact(path: Path): boolean {
    const formatted = formatKeyPath(path);
    return !this.broken.some((brokenPath) => isAtOrBelow(brokenPath, formatted));
  }
}

function checkUnique(problems: Problems, entries: { id: string | undefined; path: Path }[]): void {
  const firstById = new Map<string, Path>();
  for (const { id, path } of entries) {
    if (id === undefined) {
      problems.add([...path, "id"], "is required");
      continue;
    }
    const first = firstById.get(id);
    if (first === undefined) firstById.set(id, path);
    else {
      problems.add(
        [...path, "id"],
        `must be unique: "${id}" is also the id of ${formatKeyPath(first)}`,
      );
    }
  }
}

function checkPipeline(problems: Problems, pipeline: RawPipeline, path: Path): void {
  if (pipeline.source === undefined) problems.add([...path, "source"], "is required");
  else {
    checkLocation(problems, pipeline.source, [...path, "source"]);
    const signatures = pipeline.source.signatures;
    const signaturesPath = [...path, "source", "signatures"];
    if (
      signatures !== undefined &&
      signatures.allowed_signers === undefined &&
      problems.intact(signaturesPath)
    ) {
      problems.add([...signaturesPath, "allowed_signers"], "is required");
    }
  }

  const destinations = pipeline.destinations ?? [];
  if (destinations.length === 0) {
    problems.add([...path, "destinations"], "must list at least one destination");
  }
  checkUnique(
    problems,
    destinations.map((destination, index) => ({
      id: destination.id,
      path: [...path, "destinations", index],
    })),
  );
  destinations.forEach((destination, index) => {
    checkDestination(problems, destination, [...path, "destinations", index]);
  });
}

/** Backend keys of a source or destination: which are allowed, which are required. */
function checkLocation(problems: Problems, location: RawSource, path: Path): void {
  const backend = location.backend;
  if (backend === undefined) {
    problems.add([...path, "backend"], "is required");
    return;
  }
  const present = location as Readonly<Record<string, unknown>>;
  for (const [key, backends] of Object.entries(BACKEND_KEYS)) {
    if (present[key] !== undefined && !backends.includes(backend)) {
      const plural = backends.length > 1 ? "backends" : "backend";
      problems.add([...path, key], `is valid only for the ${andList(backends)} ${plural}`);
    }
  }
  for (const key of REQUIRED_KEYS[backend]) {
    if (present[key] === undefined)
      problems.add([...path, key], `is required for the ${backend} backend`);
  }

  if (backend === "ssh") {
    if (location.private_key_file !== undefined && location.private_key_env !== undefined) {
      problems.add(
        [...path, "private_key_env"],
        "cannot be combined with private_key_file; choose one source for the private key",
      );
    }
    if (
      location.passphrase_env !== undefined &&
      location.private_key_file === undefined &&
      location.private_key_env === undefined &&
      problems.intact([...path, "private_key_file"]) &&
      problems.intact([...path, "private_key_env"])
    ) {
      problems.add([...path, "passphrase_env"], "requires private_key_file or private_key_env");
    }
  }
  const credentials = location.credentials;
  if (backend === "s3" && credentials !== undefined && problems.intact([...path, "credentials"])) {
    if (
      (credentials.access_key_id_env === undefined) !==
      (credentials.secret_access_key_env === undefined)
    ) {
      problems.add(
        [...path, "credentials"],
        "must set both access_key_id_env and secret_access_key_env, or neither",
      );
    } else if (credentials.access_key_id_env === undefined) {
      problems.add(
        [...path, "credentials"],
        "must set access_key_id_env and secret_access_key_env (leave credentials out to use the default AWS credential chain)",
      );
    }
  }
}

function checkDestination(problems: Problems, destination: RawDestination, path: Path): void {
  checkLocation(problems, destination, path);

  // Publish and transform are judged together, with their defaults, and only when both are sound.
  if (problems.intact([...path, "publish"]) && problems.intact([...path, "transform"])) {
    const source = destination.publish?.source ?? CONFIG_DEFAULTS.publishSource;
    const html = destination.publish?.html ?? CONFIG_DEFAULTS.publishHtml;
    const enabled =
      destination.transform?.markdown_to_html?.enabled ?? CONFIG_DEFAULTS.transformEnabled;
    if (!source && !html) problems.add([...path, "publish"], "must enable source, html or both");
    if (html && !enabled) {
      problems.add(
        [...path, "publish", "html"],
        "requires transform.markdown_to_html.enabled: true",
      );
    }
  }

  checkMetadataRules(problems, destination, path);
  checkMultipart(problems, destination, path);
  checkLayout(problems, destination, path);

  if (destination.links !== undefined && destination.links.base_url === undefined) {
    problems.add([...path, "links", "base_url"], "is required when links is set");
  }

  const prune = destination.retention?.prune;
  if (
    prune?.enabled === true &&
    prune.older_than === undefined &&
    prune.keep_latest === undefined &&
    problems.intact([...path, "retention", "prune"])
  ) {
    problems.add(
      [...path, "retention", "prune"],
      "must set older_than or keep_latest when enabled is true",
    );
  }
}

/**
 * Metadata rules need a backend that stores headers per object (s3): on a local directory or an
 * SFTP server they could never take effect, so they are refused rather than ignored.
 */
function checkMetadataRules(problems: Problems, destination: RawDestination, path: Path): void {
  const rules = destination.metadata;
  if (rules === undefined || !problems.intact([...path, "metadata"])) return;
  const backend = destination.backend;
  if (rules.length > 0 && backend !== undefined && backend !== "s3") {
    const name =
      destination.id === undefined ? "this destination" : `destination ${destination.id}`;
    problems.add(
      [...path, "metadata"],
      `cannot be used by ${name}: its ${backend} backend cannot store object metadata (Cache-Control, Content-Type, Content-Disposition, Content-Encoding); only the s3 backend can`,
    );
  }
  rules.forEach((rule, index) => {
    if (rule.match === undefined)
      problems.add([...path, "metadata", index, "match"], "is required");
  });
}

/** Multipart settings shape S3 uploads only; elsewhere they would be silently ignored. */
function checkMultipart(problems: Problems, destination: RawDestination, path: Path): void {
  const backend = destination.backend;
  if (destination.multipart === undefined || backend === undefined || backend === "s3") return;
  if (!problems.intact([...path, "multipart"])) return;
  const name = destination.id === undefined ? "this destination" : `destination ${destination.id}`;
  problems.add(
    [...path, "multipart"],
    `cannot be used by ${name}: only the s3 backend uploads in parts (its backend is ${backend})`,
  );
}

/**
 * A release layout needs symbolic links (local and ssh, not s3) and one owner per bundle path: a
 * release holds the whole bundle path, which several owners of a shared root cannot each switch.
 */
function checkLayout(problems: Problems, destination: RawDestination, path: Path): void {
  const name = destination.id === undefined ? "this destination" : `destination ${destination.id}`;
  const releases = destination.layout === "releases";
  if (destination.releases !== undefined && !releases && problems.intact([...path, "releases"])) {
    problems.add([...path, "releases"], `applies only with layout: releases (${name} has none)`);
  }
  if (!releases || !problems.intact([...path, "layout"])) return;
  const backend = destination.backend;
  if (backend !== undefined && backend !== "local" && backend !== "ssh") {
    problems.add(
      [...path, "layout"],
      `releases cannot be used by ${name}: its ${backend} backend has no symbolic links to switch (only local and ssh do)`,
    );
  } else if (destination.state?.mode === "shared_root") {
    problems.add(
      [...path, "layout"],
      `releases cannot be used by ${name} with state.mode: shared_root: a release holds the whole bundle path, which one owner switches`,
    );
  }
}

function checkUploadTokens(problems: Problems, raw: RawConfig): void {
  const pipelines = raw.pipelines ?? [];
  const tokens = raw.upload_tokens ?? [];
  const uploads = pipelines.some((pipeline) => pipeline.source?.backend === "http_upload");
  if (uploads && tokens.length === 0) {
    problems.add(
      ["upload_tokens"],
      "must list at least one token when a pipeline has an http_upload source",
    );
  }
  checkUnique(
    problems,
    tokens.map((token, index) => ({ id: token.id, path: ["upload_tokens", index] })),
  );
  // A pipeline whose id is missing or broken could be the one a token names: do not guess.
  const idsKnown =
    !problems.removed(["pipelines"]) && pipelines.every((pipeline) => pipeline.id !== undefined);
  const sourceById = new Map(pipelines.map((pipeline) => [pipeline.id, pipeline.source]));
  tokens.forEach((token, index) => {
    checkUploadToken(problems, token, ["upload_tokens", index], idsKnown ? sourceById : undefined);
  });
}

function checkUploadToken(
  problems: Problems,
  token: RawUploadToken,
  path: Path,
  sourceById: ReadonlyMap<string | undefined, RawSource | undefined> | undefined,
): void {
  if (token.token_env === undefined) problems.add([...path, "token_env"], "is required");
  const allowed = token.allow_pipelines;
  if (allowed === undefined || allowed.length === 0) {
    problems.add([...path, "allow_pipelines"], "must list at least one pipeline id");
    return;
  }
  const seen = new Set<string>();
  allowed.forEach((pipelineId, index) => {
    const entryPath = [...path, "allow_pipelines", index];
    if (seen.has(pipelineId)) {
      problems.add(entryPath, `lists pipeline "${pipelineId}" more than once`);
      return;
    }
    seen.add(pipelineId);
    if (sourceById === undefined) return;
    if (!sourceById.has(pipelineId)) {
      problems.add(entryPath, `names unknown pipeline "${pipelineId}"`);
      return;
    }
    const backend = sourceById.get(pipelineId)?.backend;
    if (backend !== undefined && backend !== "http_upload") {
      problems.add(
        entryPath,
        `names pipeline "${pipelineId}", whose source is ${backend}, not http_upload`,
      );
    }
  });
}

/** `a`, `a and b`, `a, b and c`. */
function andList(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}
