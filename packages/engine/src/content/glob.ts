/**
 * Glob patterns over logical paths, for metadata rules: `*` matches within one path segment,
 * `?` one character of a segment, `[abc]` / `[a-z]` / `[!abc]` one character of a class,
 * `{a,b}` either alternative, and `**` as a whole segment any number of segments (none too).
 * Dot files are not special. A pattern is checked when it is compiled, so a configuration with a
 * malformed one fails to load instead of silently matching nothing.
 */

/** Why a glob pattern is malformed. */
export class GlobError extends Error {
  override readonly name = "GlobError";
}

/** A compiled glob: tests logical paths (relative, `/`-separated). */
export interface Glob {
  readonly pattern: string;
  matches(path: string): boolean;
}

/** Compiles `pattern`, or throws a `GlobError` saying what is wrong with it. */
export function compileGlob(pattern: string): Glob {
  const problem = globProblem(pattern);
  if (problem !== undefined) throw new GlobError(problem);
  const segments = pattern.split("/");
  let source = "";
  for (const [index, segment] of segments.entries()) {
    // `**` spans whole segments: `**/x` matches `x` and `a/b/x`, `a/**/b` matches `a/b`, and
    // `a/**` matches everything below `a`.
    const separator = index === 0 || segments[index - 1] === "**" ? "" : "/";
    if (segment !== "**") source += `${separator}${segmentSource(segment)}`;
    else if (segments.length === 1) source += ".*";
    else if (index === segments.length - 1) source += `(?:${separator}[^/]+)+`;
    else source += separator === "" ? "(?:[^/]+/)*" : "(?:/[^/]+)*/";
  }
  const regex = new RegExp(`^${source}$`, "u");
  return { pattern, matches: (path) => regex.test(path) };
}

/** Why `pattern` is not a usable glob, or undefined. */
export function globProblem(pattern: string): string | undefined {
  if (pattern === "") return "must not be empty";
  if (pattern.startsWith("/")) return "must be relative (no leading /)";
  if (pattern.endsWith("/")) return "must not end with /";
  if (pattern.includes("\\")) return "must not contain \\ (paths use /)";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are the point.
  if (/[\u0000-\u001f\u007f]/.test(pattern)) return "must not contain control characters";
  for (const segment of pattern.split("/")) {
    if (segment === "") return "must not contain an empty path segment (//)";
    if (segment === "." || segment === "..") return `must not contain a ${segment} segment`;
    if (segment !== "**" && segment.includes("**")) {
      return `uses ** inside the segment ${JSON.stringify(segment)}; ** must be a whole segment`;
    }
    const problem = segmentProblem(segment);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function segmentProblem(segment: string): string | undefined {
  let depth = 0;
  for (let index = 0; index < segment.length; index++) {
    const char = segment[index];
    if (char === "[") {
      const end = classEnd(segment, index);
      if (end === undefined) return `has an unclosed [ in ${JSON.stringify(segment)}`;
      index = end;
    } else if (char === "]") {
      return `has a ] without its [ in ${JSON.stringify(segment)}`;
    } else if (char === "{") {
      depth += 1;
    } else if (char === "}") {
      if (depth === 0) return `has a } without its { in ${JSON.stringify(segment)}`;
      depth -= 1;
    }
  }
  return depth === 0 ? undefined : `has an unclosed { in ${JSON.stringify(segment)}`;
}

/** Index of the `]` closing the class opened at `start`, or undefined. */
function classEnd(segment: string, start: number): number | undefined {
  let index = start + 1;
  if (segment[index] === "!" || segment[index] === "^") index += 1;
  // A `]` right after the opening (or its negation) is a member, as in POSIX globs.
  if (segment[index] === "]") index += 1;
  const end = segment.indexOf("]", index);
  return end === -1 ? undefined : end;
}

function segmentSource(segment: string): string {
  let source = "";
  for (let index = 0; index < segment.length; index++) {
    const char = segment[index] as string;
    switch (char) {
      case "*":
        source += "[^/]*";
        break;
      case "?":
        source += "[^/]";
        break;
      case "[": {
        const end = classEnd(segment, index) as number;
        let body = segment.slice(index + 1, end);
        let negated = false;
        if (body.startsWith("!") || body.startsWith("^")) {
          negated = true;
          body = body.slice(1);
        }
        const escaped = body.replace(/[\\\]^]/g, (c) => `\\${c}`);
        source += negated ? `[^/${escaped}]` : `[${escaped}]`;
        index = end;
        break;
      }
      case "{":
        source += "(?:";
        break;
      case "}":
        source += ")";
        break;
      case ",":
        // Inside braces an alternative; elsewhere a plain comma.
        source += braceDepth(segment, index) > 0 ? "|" : ",";
        break;
      default:
        source += char.replace(/[.+^$()|\\]/g, (c) => `\\${c}`);
    }
  }
  return source;
}

/** How many `{` are open at `position` of a segment (classes skipped). */
function braceDepth(segment: string, position: number): number {
  let depth = 0;
  for (let index = 0; index < position; index++) {
    const char = segment[index];
    if (char === "[") index = classEnd(segment, index) ?? index;
    else if (char === "{") depth += 1;
    else if (char === "}") depth -= 1;
  }
  return depth;
}
