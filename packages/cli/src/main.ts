import { createCliBackends } from "./backends.js";
import type { CommandOutcome } from "./command.js";
import {
  describeFailure,
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  errorMessage,
  isUsageError,
} from "./errors.js";
import type { CliIO } from "./io.js";
import { nodeLineNotice } from "./node-line.js";
import { parseCommandLine } from "./parse.js";
import { colourEnabled } from "./render/colour.js";
import { envelope, renderEnvelope } from "./render/envelope.js";

/**
 * Runs one distributor command line (the arguments after `distributor`) and returns the exit
 * status. Only here are errors mapped to exit statuses and outcomes rendered.
 */
export async function main(argv: readonly string[], io: CliIO): Promise<number> {
  let invocation: Awaited<ReturnType<typeof parseCommandLine>>;
  try {
    invocation = await parseCommandLine(argv);
  } catch (error) {
    return reportUnexpected(io, error);
  }
  if (invocation.kind === "help") {
    // An empty answer to a completion request stays empty: the shell then completes file names.
    const { text } = invocation;
    io.stdout.write(text === "" || text.endsWith("\n") ? text : `${text}\n`);
    return EXIT_OK;
  }

  const { command, format } = invocation;
  const colour =
    format === "text" &&
    colourEnabled({
      noColorFlag: invocation.noColor,
      env: io.env ?? {},
      isTTY: io.stdoutIsTTY === true,
    });
  // The S3 adapter is the part that needs a newer Node soonest (see node-line.ts).
  let openedS3 = false;
  const backends = createCliBackends((backend) => {
    if (backend === "s3") openedS3 = true;
  });
  let outcome: CommandOutcome;
  try {
    outcome = await invocation.execute({
      command,
      format,
      io,
      colour,
      signal: io.signal ?? new AbortController().signal,
      backends,
    });
  } catch (error) {
    if (isUsageError(error)) return reportUnexpected(io, error);
    outcome = { ok: false, result: null, text: [], error: await describeFailure(error) };
  }

  if (format === "json") {
    io.stdout.write(renderEnvelope(envelope(command, outcome.ok, outcome.result, outcome.error)));
  } else {
    for (const line of outcome.text) io.stdout.write(`${line}\n`);
    for (const line of outcome.warnings ?? []) io.stderr.write(`distributor: warning: ${line}\n`);
    if (!outcome.ok) {
      const lines = outcome.diagnostics ?? [outcome.error?.message ?? `${command} failed`];
      for (const line of lines) io.stderr.write(`distributor: ${line}\n`);
    }
  }
  const notice = openedS3 ? nodeLineNotice(io.nodeVersion ?? process.versions.node) : undefined;
  if (notice !== undefined) io.stderr.write(`distributor: ${notice}\n`);
  return outcome.ok ? EXIT_OK : EXIT_FAILURE;
}

/** Usage errors (exit 2) and failures before any command ran (exit 1): stderr only. */
function reportUnexpected(io: CliIO, error: unknown): number {
  io.stderr.write(`distributor: ${errorMessage(error)}\n`);
  return isUsageError(error) ? EXIT_USAGE : EXIT_FAILURE;
}
