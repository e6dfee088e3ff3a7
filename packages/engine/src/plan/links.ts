export type OutputKind = "source" | "generated";

export type PrimaryPolicy = "auto" | "html" | "source" | "none";

/**
 * URL of a destination path below `baseUrl`. The base is treated as a directory; each path segment
 * is percent-encoded; an `index.html` output is addressed by its directory URL ending in `/`.
 */
export function outputUrl(baseUrl: string, destinationPath: string): string {
  const base = new URL(baseUrl);
  if (!base.pathname.endsWith("/")) base.pathname = `${base.pathname}/`;
  base.search = "";
  base.hash = "";
  const segments = destinationPath.split("/");
  if (segments[segments.length - 1] === "index.html") segments[segments.length - 1] = "";
  const relative = segments.map((segment) => encodeURIComponent(segment)).join("/");
  return new URL(relative, base).toString();
}

interface PrimaryCandidate {
  /** Output path relative to the bundle path. */
  path: string;
  kind: OutputKind;
  url?: string | undefined;
}

function choose(
  outputs: readonly PrimaryCandidate[],
  kind: OutputKind,
): PrimaryCandidate | undefined {
  const ofKind = outputs.filter((output) => output.kind === kind);
  if (ofKind.length === 1) return ofKind[0];
  return ofKind.find((output) => output.path === "index.html");
}

/**
 * The primary URL of a publication: `html` picks the only generated output, else a generated
 * `index.html` at the bundle root; `source` applies the same rule to copies; `auto` tries `html`
 * then `source`; `none` never has one.
 */
export function selectPrimaryUrl(
  outputs: readonly PrimaryCandidate[],
  policy: PrimaryPolicy,
): string | undefined {
  let chosen: PrimaryCandidate | undefined;
  switch (policy) {
    case "none":
      return undefined;
    case "html":
      chosen = choose(outputs, "generated");
      break;
    case "source":
      chosen = choose(outputs, "source");
      break;
    case "auto":
      chosen = choose(outputs, "generated") ?? choose(outputs, "source");
      break;
  }
  return chosen?.url;
}
