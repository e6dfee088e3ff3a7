import type { CommandFailure } from "../command.js";

/** The single JSON document `--format json` prints on stdout. */
export interface Envelope {
  command: string;
  ok: boolean;
  result: unknown;
  /** Present only when `ok` is false. */
  error?: CommandFailure;
}

export function envelope(
  command: string,
  ok: boolean,
  result: unknown,
  error?: CommandFailure,
): Envelope {
  const document: Envelope = { command, ok, result: result ?? null };
  if (!ok) document.error = error ?? { code: "failed", message: `${command} failed` };
  return document;
}

/** Two-space indented JSON and a trailing newline, like every document distributor writes. */
export function renderEnvelope(document: Envelope): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}
