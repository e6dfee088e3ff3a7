import { describe, expect, it } from "vitest";
import { JsonNumber, JsonSyntaxError, parseStrictJson } from "../src/strict-json.js";

function syntaxError(text: string): JsonSyntaxError {
  try {
    parseStrictJson(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
}

describe("parseStrictJson", () => {
  it("parses the JSON value kinds, keeping numbers as written", () => {
    const value = parseStrictJson(
      ' {"a": [1, -0.5e+3, true, false, null], "b": "x\\u00e9\\n\\"\\/"} ',
    );
    expect(value).toBeInstanceOf(Map);
    const object = value as Map<string, unknown>;
    const array = object.get("a") as unknown[];
    expect(array[0]).toEqual(new JsonNumber("1"));
    expect((array[1] as JsonNumber).text).toBe("-0.5e+3");
    expect((array[1] as JsonNumber).value).toBe(-500);
    expect(array.slice(2)).toEqual([true, false, null]);
    expect(object.get("b")).toBe('xé\n"/');
  });

  it("agrees with JSON.parse on strings with escapes and surrogate pairs", () => {
    const text = JSON.stringify("tab\there \u{1d44e} \u0001 \\ end");
    expect(parseStrictJson(text)).toBe(JSON.parse(text));
    expect(parseStrictJson('"\\ud835\\udc4e"')).toBe("\u{1d44e}");
  });

  it("rejects duplicate keys", () => {
    expect(syntaxError('{"id": "a", "id": "b"}').message).toBe(
      'invalid JSON at line 1 column 13: duplicate key "id"',
    );
  });

  it("rejects trailing data", () => {
    expect(syntaxError('{"a": 1} {"b": 2}').reason).toBe("trailing data after the document");
    expect(syntaxError("{}\n,").reason).toBe("trailing data after the document");
  });

  it.each([
    ["", "unexpected end of input"],
    ["{", "expected a string key"],
    ['{"a" 1}', "expected :"],
    ['{"a": 1,}', "expected a string key"],
    ["[1,]", 'unexpected character "]"'],
    ["[1 2]", "expected , or ] in array"],
    ['{"a": 1 "b": 2}', "expected , or } in object"],
    ["01", "invalid number"],
    ["1.", "invalid number"],
    ["-", "invalid number"],
    ["1e", "invalid number"],
    ["+1", 'unexpected character "+"'],
    ["NaN", 'unexpected character "N"'],
    ["tru", 'unexpected character "t"'],
    ['"abc', "unterminated string"],
    ['"a\nb"', "control character in string"],
    ['"\\x"', "invalid escape"],
    ['"\\u12G4"', "invalid \\u escape"],
    ["'a'", 'unexpected character "\'"'],
    ['\ufeff{"a": 1}', "byte order mark before the document"],
  ])("rejects %j (%s)", (text, reason) => {
    expect(syntaxError(text).reason).toBe(reason);
  });

  it("reports the line and column of the problem", () => {
    const error = syntaxError('{\n  "a": 1,\n  "b": x\n}');
    expect([error.line, error.column]).toEqual([3, 8]);
  });

  it("bounds nesting depth instead of overflowing the stack", () => {
    expect(syntaxError("[".repeat(100_000)).reason).toBe("nesting deeper than 64 levels");
    expect(() => parseStrictJson(`${"[".repeat(64)}${"]".repeat(64)}`)).not.toThrow();
  });
});
