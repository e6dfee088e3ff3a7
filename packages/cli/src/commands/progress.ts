import type { CliIO } from "../io.js";
import { createRunProgress, type RunProgress } from "../render/progress.js";

/**
 * The progress display of a run or apply, drawn only where a person watches stderr (a terminal)
 * and `wanted`; a pipe or file gets exactly what it got before.
 */
export function terminalProgress(io: CliIO, wanted: boolean): RunProgress | undefined {
  return io.stderrIsTTY === true && wanted
    ? createRunProgress({
        stderr: io.stderr,
        ...(io.stderrColumns ? { columns: io.stderrColumns } : {}),
      })
    : undefined;
}
