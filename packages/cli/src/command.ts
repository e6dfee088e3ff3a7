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
