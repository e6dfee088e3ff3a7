/**
 * What the CLI says about the Node.js line it runs on (docs/decisions.md, "Node lines"): Node 20
 * is past its end of life (April 2026) and still works, but the AWS SDK releases after the first
 * week of January 2027 need Node 22, and so will distributor's. The SDK's own eight-line warning
 * is silenced in bin.cts; this one line replaces it, printed once after a command that opened
 * an S3 location. Undefined on every other line.
 */
export function nodeLineNotice(version: string): string | undefined {
  const major = Number.parseInt(version.replace(/^v/, ""), 10);
  if (major !== 20) return undefined;
  return `note: Node.js ${version.replace(/^v/, "")} is past its end of life (April 2026); releases after January 2027 need Node.js 22 or later, as the AWS SDK does`;
}
