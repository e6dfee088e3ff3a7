import { stringify } from "yaml";
import { ConfigError, parseConfig } from "../../src/config/index.js";

type Fields = Record<string, unknown>;

/** Every problem `parseConfig` reports for `text`; fails the test when the text is valid. */
export function problemsOf(text: string): string[] {
  try {
    parseConfig(text, { sourceName: "test.yml" });
  } catch (error) {
    if (error instanceof ConfigError) return [...error.issues];
    throw error;
  }
  throw new Error(`configuration unexpectedly valid:\n${text}`);
}

/** The one problem reported for `text`; fails when there are none or several. */
export function onlyProblem(text: string): string {
  const problems = problemsOf(text);
  if (problems.length !== 1) throw new Error(`expected one problem, got:\n${problems.join("\n")}`);
  return problems[0] as string;
}

/**
 * YAML for one pipeline `reports` (local source) with one destination `archive` (local), with
 * `destination`, `pipeline` and `top` fields merged in. A field set to undefined is left out.
 */
export function configText(
  destination: Fields = {},
  pipeline: Fields = {},
  top: Fields = {},
): string {
  return stringify({
    ...top,
    pipelines: [
      {
        id: "reports",
        source: { backend: "local", path: "/source" },
        destinations: [{ id: "archive", backend: "local", path: "/archive", ...destination }],
        ...pipeline,
      },
    ],
  });
}

/** `configText` for a destination with only the given backend fields (no default path). */
export function destinationText(fields: Fields): string {
  return configText({ backend: undefined, path: undefined, ...fields });
}
