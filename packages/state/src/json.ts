import {
  type ElementHook,
  type PiecedJson,
  parseJsonPiecesSteps,
  parseJsonSteps,
} from "@distributor/bundle";
import { StateError } from "./errors.js";
import { runSteps, type Steps } from "./steps.js";
import { parseStateTimestamp } from "./time.js";

/** A decoded JSON object. Unknown keys are ignored by the readers below, as the reference did. */
export type JsonObject = Record<string, unknown>;

/**
 * Decodes one JSON object. Text after the first complete value is reported as `trailing data`
 * rather than as a syntax error, as the reference's streaming decoder did.
 */
export function decodeStateJson(text: string): JsonObject {
  return runSteps(decodeStateJsonSteps(text));
}

/**
 * `decodeStateJson` in steps: a long document is parsed in slices (`parseJsonSteps`); a document
 * given in pieces (`PiecedJson`) is never held whole unless it is invalid.
 */
export function* decodeStateJsonSteps(
  text: string | PiecedJson,
  elements?: ElementHook,
): Steps<JsonObject> {
  let value: unknown;
  try {
    value = yield* typeof text === "string"
      ? parseJsonSteps(text, undefined, elements)
      : parseJsonPiecesSteps(text, undefined, elements);
  } catch (error) {
    const whole = typeof text === "string" ? text : text.whole();
    if (hasTrailingData(whole)) throw new StateError("parse distributor state: trailing data");
    throw new StateError(`parse distributor state: ${syntaxDetail(error)}`, { cause: error });
  }
  if (!isJsonObject(value)) {
    throw new StateError("parse distributor state: document must be a JSON object");
  }
  return value;
}

/**
 * The engine's JSON syntax message without the excerpt of the document it quotes (which may hold
 * newlines or anything else the file contains): `invalid JSON: Unexpected token 'o' at position 1`.
 */
function syntaxDetail(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const reason = message.split(/, "|\n/)[0]?.trim() ?? "";
  const position = /position (\d+)/.exec(message)?.[1];
  const where =
    position !== undefined && !reason.includes("position") ? ` at position ${position}` : "";
  return `invalid JSON: ${reason}${where}`;
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True when `text` starts with one complete JSON value followed by more than whitespace. */
function hasTrailingData(text: string): boolean {
  const end = firstValueEnd(text);
  if (end === undefined || text.slice(end).trim() === "") return false;
  try {
    JSON.parse(text.slice(0, end));
    return true;
  } catch {
    return false;
  }
}

/** Index just past the first JSON value of `text`, found by bracket and string scanning. */
function firstValueEnd(text: string): number | undefined {
  let index = text.length - text.trimStart().length;
  const first = text[index];
  if (first === undefined) return undefined;
  if (first !== "{" && first !== "[" && first !== '"') {
    const scalar = /^[^\s{}[\],"]+/.exec(text.slice(index));
    return scalar === null ? undefined : index + scalar[0].length;
  }
  let depth = 0;
  let inString = false;
  for (; index < text.length; index++) {
    const char = text[index];
    if (inString) {
      if (char === "\\") index++;
      else if (char === '"') {
        inString = false;
        if (depth === 0) return index + 1;
      }
    } else if (char === '"') inString = true;
    else if (char === "{" || char === "[") depth++;
    else if (char === "}" || char === "]") {
      depth--;
      if (depth === 0) return index + 1;
    }
  }
  return undefined;
}

/** An own property, with `null` treated as absent (as Go's decoder treats it for pointers). */
export function field(object: JsonObject, key: string): unknown {
  const value = Object.hasOwn(object, key) ? object[key] : undefined;
  return value === null ? undefined : value;
}

/** A non-empty string; `name` is the full field name used in messages (`state outputs[0].path`). */
export function requiredString(object: JsonObject, key: string, name: string): string {
  const value = field(object, key);
  if (value === undefined || value === "") throw new StateError(`${name} is required`);
  if (typeof value !== "string") throw new StateError(`${name} must be a string`);
  return value;
}

/** A string that may be absent; the empty string counts as absent. */
export function optionalString(object: JsonObject, key: string, name: string): string | undefined {
  const value = field(object, key);
  if (value === undefined || value === "") return undefined;
  if (typeof value !== "string") throw new StateError(`${name} must be a string`);
  return value;
}

/**
 * Instants a parse has read, by their text: the records one run wrote share a few timestamps, so a
 * big state holds each once, and parses it once. Dates read through it are shared between
 * records; nothing changes a parsed state's dates (documents are frozen; a `Date` cannot be).
 */
export class TimestampCache {
  readonly #dates = new Map<string, Date>();

  get(text: string): Date | undefined {
    return this.#dates.get(text);
  }

  set(text: string, date: Date): void {
    // Bounded: a state whose records all differ keeps no more than a few.
    if (this.#dates.size >= TIMESTAMP_CACHE_SIZE) this.#dates.clear();
    this.#dates.set(text, date);
  }
}

const TIMESTAMP_CACHE_SIZE = 64;

export function requiredTimestamp(
  object: JsonObject,
  key: string,
  name: string,
  cache?: TimestampCache,
): Date {
  const text = requiredString(object, key, name);
  const known = cache?.get(text);
  if (known !== undefined) return known;
  const parsed = parseStateTimestamp(text);
  if (!parsed.ok) {
    throw new StateError(`${name} must be RFC3339: ${JSON.stringify(text)}: ${parsed.problem}`);
  }
  cache?.set(text, parsed.date);
  return parsed.date;
}

export function requiredInteger(object: JsonObject, key: string, name: string): number {
  const value = field(object, key);
  if (value === undefined) throw new StateError(`${name} is required`);
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new StateError(`${name} must be an integer`);
  }
  return value;
}

/** An object that may be absent; callers report absence with their own message. */
export function optionalObject(
  object: JsonObject,
  key: string,
  name: string,
): JsonObject | undefined {
  const value = field(object, key);
  if (value === undefined) return undefined;
  if (!isJsonObject(value)) throw new StateError(`${name} must be an object`);
  return value;
}

/** Element `index` of an array that must hold objects. */
export function arrayObject(value: unknown, name: string): JsonObject {
  if (!isJsonObject(value)) throw new StateError(`${name} must be an object`);
  return value;
}

/** `mode` of a `state`/`reconciliation` object: `<name>.mode is required` when absent or empty. */
export function requiredMode(object: JsonObject, key: string, name: string): string {
  const policy = optionalObject(object, key, name);
  if (policy === undefined) throw new StateError(`${name}.mode is required`);
  return requiredString(policy, "mode", `${name}.mode`);
}
