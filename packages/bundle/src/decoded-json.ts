import { JsonNumber, type JsonObject, type JsonValue } from "./strict-json.js";

// Values `JSON.parse` decoded, in the shape the strict parser gives (maps, numbers as their text).

/** A decoded document in the strict parser's shape, its file list left to be read entry by entry. */
export function decoded(value: unknown): JsonValue {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fromDecodedJson(value);
  }
  const document: JsonObject = new Map();
  for (const [key, member] of Object.entries(value)) {
    const raw = key === "files" && Array.isArray(member);
    document.set(key, raw ? (member as JsonValue[]) : fromDecodedJson(member));
  }
  return document;
}

/**
 * A value of `JSON.parse` in the strict parser's shape: what that parser would return for its
 * `JSON.stringify` text (objects as maps, numbers as the text `JSON.stringify` writes).
 */
export function fromDecodedJson(value: unknown): JsonValue {
  if (typeof value === "number") return new JsonNumber(JSON.stringify(value));
  if (Array.isArray(value)) return value.map(fromDecodedJson);
  if (typeof value === "object" && value !== null) {
    const members: JsonObject = new Map();
    for (const key of Object.keys(value)) {
      members.set(key, fromDecodedJson((value as Record<string, unknown>)[key]));
    }
    return members;
  }
  // Strings, booleans and null are the same in both shapes; undefined cannot come from JSON.
  return value as JsonValue;
}
