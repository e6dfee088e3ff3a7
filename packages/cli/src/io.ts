/** Where a command writes text; `process.stdout` and test buffers both fit. */
export interface TextSink {
  write(chunk: string): unknown;
}

/** The process surroundings a command runs in, passed in so `main` can run in-process too. */
export interface CliIO {
  stdout: TextSink;
  stderr: TextSink;
  /** Progress is drawn on stderr only when it is an interactive terminal. */
  stderrIsTTY?: boolean;
  /** The width of that terminal when known (it may change while a command runs). */
  stderrColumns?: () => number | undefined;
  /** Whether stdout is an interactive terminal (colour is drawn only there). */
  stdoutIsTTY?: boolean;
  /** The process environment, for NO_COLOR; defaults to none. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Aborted when the operator interrupts the process. */
  signal?: AbortSignal;
  /** The Node.js version the notice about end-of-life lines reads; default `process.versions.node`. */
  nodeVersion?: string;
}
