import * as v from "valibot";
import { formatKeyPath, type KeySegment } from "./key-path.js";
import { configSchema, type RawConfig } from "./schema.js";
import { NOT_A_MAPPING, UNKNOWN_KEY } from "./schema-fields.js";

export interface StructureResult {
  /** The document as the schema returns it, once every broken key has been set aside. */
  raw?: RawConfig;
  /** One message per schema problem, each starting with its key path. */
  issues: string[];
  /** Key paths whose values were set aside; rules about them or below them stay quiet. */
  broken: string[];
}

// Each pass removes at least one key, so this only bounds pathological documents.
const MAX_PASSES = 100;

/**
 * Checks the document against the schema and collects every problem. valibot reports at most one
 * unknown key per mapping, and a broken value hides the cross-key rules, so each pass removes the
 * keys it found broken and checks again until the rest of the document passes. The returned `raw`
 * then lets validate.ts check its rules on everything that is sound.
 *
 * `document` is modified in place (broken keys are deleted).
 */
export function checkStructure(document: unknown): StructureResult {
  const issues: string[] = [];
  const broken: string[] = [];
  const seen = new Set<string>();
  for (let pass = 0; pass < MAX_PASSES; pass += 1) {
    const result = v.safeParse(configSchema, document);
    if (result.success) return { raw: result.output, issues, broken };

    let removed = false;
    for (const issue of result.issues) {
      const segments = (issue.path ?? []).map((item) => item.key as KeySegment);
      const message = describe(issue, segments);
      if (!seen.has(message)) {
        seen.add(message);
        issues.push(message);
      }
      const setAside = setAsideBroken(document, segments, issue);
      if (setAside !== undefined) {
        broken.push(formatKeyPath(setAside));
        removed = true;
      }
    }
    if (!removed) return { issues, broken };
  }
  issues.push("too many problems to list them all; fix these and check again");
  return { issues, broken };
}

function describe(issue: v.BaseIssue<unknown>, segments: readonly KeySegment[]): string {
  const path = formatKeyPath(segments);
  if (issue.type === "strict_object" && issue.expected === "never") {
    return `${path}: ${UNKNOWN_KEY}`;
  }
  return `${path === "" ? "the configuration" : path} ${issue.message}`;
}

/**
 * Takes the broken value out of the document and returns the key path it was at. A mapping key is
 * deleted; a list item is replaced by a neutral item of the expected type (so that its siblings
 * keep their indexes and their checks); anything else removes the nearest enclosing key.
 */
function setAsideBroken(
  document: unknown,
  segments: readonly KeySegment[],
  issue: v.BaseIssue<unknown>,
): readonly KeySegment[] | undefined {
  const last = segments.at(-1);
  if (typeof last === "number") {
    const neutral = neutralItem(issue);
    if (neutral !== undefined && replaceItem(document, segments, neutral)) return segments;
  }
  const keyIndex = segments.findLastIndex((segment) => typeof segment === "string");
  if (keyIndex === -1) return undefined;
  const keyPath = segments.slice(0, keyIndex + 1);
  return removeKey(document, keyPath) ? keyPath : undefined;
}

/** An item that passes the item schema: every mapping key is optional, strings may be empty. */
function neutralItem(issue: v.BaseIssue<unknown>): unknown {
  if (issue.message === NOT_A_MAPPING) return {};
  if (issue.type === "string") return "";
  return undefined;
}

function replaceItem(document: unknown, segments: readonly KeySegment[], item: unknown): boolean {
  const list = valueAt(document, segments.slice(0, -1));
  const index = segments.at(-1);
  if (!Array.isArray(list) || typeof index !== "number" || index >= list.length) return false;
  list[index] = item;
  return true;
}

function valueAt(document: unknown, segments: readonly KeySegment[]): unknown {
  let value: unknown = document;
  for (const segment of segments) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<KeySegment, unknown>)[segment];
  }
  return value;
}

/** Deletes the key at the end of `segments`; false when it is already gone. */
function removeKey(document: unknown, segments: readonly KeySegment[]): boolean {
  const parent = valueAt(document, segments.slice(0, -1));
  const key = segments.at(-1);
  if (typeof parent !== "object" || parent === null || Array.isArray(parent)) return false;
  if (typeof key !== "string" || !Object.hasOwn(parent, key)) return false;
  return Reflect.deleteProperty(parent, key);
}
