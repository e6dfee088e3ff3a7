/**
 * Cancellation contract shared by the bundled backends: an aborted operation rejects with the
 * signal's own `reason` (a DOMException named `AbortError` unless the caller chose another), never
 * with a `StorageError`, so callers can tell "I cancelled this" apart from storage failures.
 */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  signal?.throwIfAborted();
}

/**
 * Runs `operation` unless the signal already fired. If it fails after the signal fired, the failure
 * is reported as the abort; other failures go through `mapError` (e.g. errno → `StorageError`).
 */
export async function abortable<T>(
  signal: AbortSignal | undefined,
  operation: () => Promise<T>,
  mapError: (error: unknown) => unknown,
): Promise<T> {
  throwIfAborted(signal);
  try {
    return await operation();
  } catch (error) {
    // Streams and pipelines wrap the reason in their own AbortError; unwrap to the one contract.
    throwIfAborted(signal);
    throw mapError(error);
  }
}
