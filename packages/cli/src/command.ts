import type { BackendRegistry } from "@distributor/publish";
import type { CliIO } from "./io.js";

export type OutputFormat = "text" | "json";

/** A failure as the JSON envelope reports it. */
export interface CommandFailure {
  code: string;
  message: string;
}

/**
 * What a command handler produced. `main` renders it: under `--format json` as the envelope
 * `{command, ok, result, error}`, as text otherwise; the exit status is 0 when `ok`, else 1.
 */
export interface CommandOutcome {
  ok: boolean;
  /** The report printed as `result` under `--format json` (snake_case fields); a failure may carry a partial one. */
  result: unknown;
  /** Lines for stdout in text mode. */
  text: readonly string[];
  /** Set when `ok` is false. */
  error?: CommandFailure;
  /**
   * Lines for stderr in text mode, each printed as `distributor: <line>`. When absent, a failed
   * outcome prints `error.message` instead.
   */
  diagnostics?: readonly string[];
  /** Lines for stderr in text mode whatever the outcome, each printed as `distributor: warning: <line>`. */
  warnings?: readonly string[];
}

/** Everything a handler needs besides its flags. */
export interface CommandContext {
  /** The command name used in the JSON envelope, e.g. `manifest create`. */
  command: string;
  format: OutputFormat;
  io: CliIO;
  /** Whether text may be coloured (see render/colour.ts); never under `--format json`. */
  colour: boolean;
  signal: AbortSignal;
  /** Storage backends by name; each entry loads its adapter on first use. */
  backends: BackendRegistry;
}

/**
 * A command handler: flags are already checked and normalised. It throws `UsageError` for a flag
 * value it finds unusable (exit 2) and any other error for a failure (exit 1).
 */
export type CommandHandler<Options> = (
  options: Options,
  context: CommandContext,
) => Promise<CommandOutcome>;

export type ValidateCommandOptions =
  | {
      kind: "path";
      path: string;
      /** `--allowed-signers`: check every bundle's signature against this file. */
      allowedSigners?: string;
      /** `--signature-namespace` (default `distributor`). */
      signatureNamespace?: string;
    }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string };

export type InspectCommandOptions =
  | { kind: "path"; path: string }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string }
  | { kind: "destination"; configPath: string; pipelineId: string; destinationId: string };

export interface ManifestCreateCommandOptions {
  path: string;
  id: string;
  /** The `--created` value as typed; the handler parses it. */
  created?: string;
  force: boolean;
  /** `--max-files`: most files to list (default 100000). */
  maxFiles?: number;
  /** `--sign`: the key file `ssh-keygen -Y sign -f` takes. */
  sign?: string;
  /** `--signature-namespace` (default `distributor`). */
  signatureNamespace?: string;
}

export interface RunCommandOptions {
  /** `--config`, defaulting to `./distributor.yml`. */
  configPath: string;
  /** `--pipeline` values in command-line order; empty means every pipeline. */
  pipelineIds: string[];
  dryRun: boolean;
  force: boolean;
  /** `--repair`: restore missing or changed managed outputs of unchanged sources. */
  repair: boolean;
  /** `--stage`: commit each release without making it live (layout: releases). */
  stage: boolean;
  /** `--allow-deletes N`: deletes allowed whatever a destination's `max_deletes` says. */
  allowDeletes?: number;
  /** `--lock-timeout` as typed (a Go duration); the handler parses it. */
  lockTimeout?: string;
  /** `--plan-out`: plan only, and save the plan to this file. */
  planOut?: string;
  /** `--quiet`: no progress display and no summary line, even on a terminal. */
  quiet: boolean;
}

export interface ApplyCommandOptions {
  /** The plan file as typed. */
  planPath: string;
  /** `--config`; absent: the configuration the plan names. */
  configPath?: string;
  dryRun: boolean;
  lockTimeout?: string;
  /** `--max-age` as typed (a duration). */
  maxAge?: string;
  quiet: boolean;
}

export interface AuditCommandOptions {
  configPath: string;
  /** `--pipeline` values; empty means every pipeline. */
  pipelineIds: string[];
  destinationId?: string;
  /** `--quiet`: no progress on stderr, even on a terminal. */
  quiet: boolean;
  /** `--release`: under layout: releases, check every committed release or the current one. */
  releases: "all" | "current";
}

export interface ReconcileStateCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  allOwners: boolean;
  /** `--adopt` or `--rebuild` (at most one); absent for the plain repair of missing records. */
  mode?: "adopt" | "rebuild";
  dryRun: boolean;
  lockTimeout?: string;
  /** `--bundle-path`; absent: the destination root. */
  bundlePath?: string;
}

export interface PruneCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  /** True for `--dry-run`, false for `--apply` (exactly one is given). */
  dryRun: boolean;
  lockTimeout?: string;
}

/** `distributor promote`: rollback's options, aimed at a staged release. */
export interface PromoteCommandOptions extends Omit<RollbackCommandOptions, "to"> {
  /** `--to <release>`; absent with `--latest`. */
  to?: string;
  /** `--latest`: the newest staged release. */
  latest: boolean;
}

export interface RollbackCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  /** `--bundle-path`; absent: the destination root. */
  bundlePath?: string;
  /** `--to <release>`; absent with `--previous`. */
  to?: string;
  dryRun: boolean;
  /** `--verify`: compare every file's digest with the target's snapshot. */
  verify: boolean;
  /** `--force`: switch to a target that changed since it was committed. */
  force: boolean;
  lockTimeout?: string;
}

export interface ServeCommandOptions {
  /** `--config`, defaulting to `./distributor.yml`. */
  configPath: string;
  /** `--listen`, overriding `server.http.listen`. */
  listen?: string;
}

export interface UploadCommandOptions {
  /** `--server`: base URL of `distributor serve`, checked to be http(s). */
  server: string;
  pipelineId: string;
  /** `--token-env`: the environment variable holding the upload token. */
  tokenEnv: string;
  /** `--idempotency-key` as typed; the handler checks it (generated when absent). */
  idempotencyKey?: string;
  wait: boolean;
  /** The bundle directory as typed. */
  path: string;
  /** `--sign`: sign the manifest with this key file first. */
  sign?: string;
  /** `--signature-namespace` (default `distributor`). */
  signatureNamespace?: string;
  /** `--max-files`: most files the bundle may list (default 10000, the pipelines' default). */
  maxFiles?: number;
}
