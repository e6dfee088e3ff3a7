/**
 * What the CLI says about the Node.js line it runs on (docs/decisions.md, "Node lines"): a line
 * below 22 is past its end of life and still works, but the AWS SDK releases after the first week
 * of January 2027 need Node 22, and so will distributor's. The SDK's own eight-line warning is
 * silenced in bin.cts; this one line replaces it, printed once after a command that opened an S3
 * location, naming when support ended and the lines that work. Undefined on every other line.
 */
export function nodeLineNotice(version: string): string | undefined {
  const shown = version.replace(/^v/, "");
  const major = Number.parseInt(shown, 10);
  if (!(major < OLDEST_SUPPORTED_LINE)) return undefined;
  const ended = SUPPORT_ENDED[major];
  return `note: Node.js ${shown} is past its end of life${ended === undefined ? "" : ` (${ended})`}; distributor supports ${SUPPORTED_LINES}, and releases after January 2027 need one of them, as the AWS SDK does`;
}

const OLDEST_SUPPORTED_LINE = 22;

/** The supported lines as the notice names them; 26 has been the active LTS since October 2026. */
const SUPPORTED_LINES = "Node.js 22, 24 and 26 (the active LTS)";

/** When each line below the oldest supported one left support. */
const SUPPORT_ENDED: Readonly<Record<number, string>> = {
  18: "April 2025",
  19: "June 2023",
  20: "April 2026",
  21: "June 2024",
};
