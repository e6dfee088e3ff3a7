import { isAlias, LineCounter, parseDocument, visit, type YAMLError } from "yaml";
import { ConfigError } from "./errors.js";

// Anchors and aliases are allowed for sharing blocks; this bounds how far they can expand.
const MAX_ALIAS_COUNT = 100;

/**
 * Parses one YAML 1.2 document (core schema: `yes`/`on` stay strings, merge keys `<<` apply) into
 * plain data. Duplicate
 * keys, unknown tags, unresolved aliases and several documents in one file are errors, each
 * reported with its line and column. A key whose value is empty (`key:` or `key: null`) counts as
 * absent. Throws a ConfigError naming `sourceName`.
 */
export function parseYaml(text: string, sourceName: string): unknown {
  const lineCounter = new LineCounter();
  const document = parseDocument(text, {
    version: "1.2",
    schema: "core",
    // `<<: *anchor` merges a shared mapping, as YAML 1.1's merge key did.
    merge: true,
    strict: true,
    uniqueKeys: true,
    prettyErrors: true,
    lineCounter,
  });
  const issues = [...document.errors, ...document.warnings].map(describe);
  if (issues.length === 0) {
    // toJS reports an alias without an earlier anchor but not where it is; find it here.
    const anchors = new Set<string>();
    visit(document, {
      Node(_key, node) {
        if (!isAlias(node)) {
          if (node.anchor !== undefined) anchors.add(node.anchor);
        } else if (!anchors.has(node.source)) {
          const { line, col } = lineCounter.linePos(node.range?.[0] ?? 0);
          issues.push(`YAML error at line ${line}, column ${col}: unknown alias *${node.source}`);
        }
      },
    });
  }
  if (issues.length > 0) throw new ConfigError(sourceName, issues);

  let data: unknown;
  try {
    data = document.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    throw new ConfigError(sourceName, [`YAML error: ${(error as Error).message}`], {
      cause: error,
    });
  }
  return withoutEmptyValues(data ?? {});
}

function describe(error: YAMLError): string {
  const firstLine = error.message.split("\n", 1)[0] ?? error.message;
  const summary = firstLine.replace(/ at line \d+, column \d+:?$/, "");
  const position = error.linePos?.[0];
  const where = position === undefined ? "" : ` at line ${position.line}, column ${position.col}`;
  return `YAML ${error.name === "YAMLWarning" ? "error" : "syntax error"}${where}: ${summary}`;
}

/** Copies the data into fresh plain objects (so `__proto__` stays a key) without null values. */
function withoutEmptyValues(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutEmptyValues);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, entry]) => entry !== null && entry !== undefined)
      .map(([key, entry]) => [key, withoutEmptyValues(entry)]),
  );
}
