import { runSteps } from "@distributor/storage";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseJsonPiecesSteps, parseJsonSteps, parseStrictJsonSteps } from "../src/json-slices.js";
import { type JsonValue, parseStrictJson } from "../src/strict-json.js";

/** Parses `text` in steps of at most `slice` characters, counting the pauses. */
function sliced(text: string, slice: number): { value: unknown; pauses: number } {
  const steps = parseJsonSteps(text, slice);
  let pauses = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return { value: next.value, pauses };
    pauses++;
  }
}

/** What `JSON.parse` does with `text`: its value, or its error message. */
function native(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function outcome(text: string, slice: number): { value: unknown } | { error: string } {
  try {
    return { value: sliced(text, slice).value };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Own keys in enumeration order, recursively: `toEqual` alone ignores member order. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (typeof value === "object" && value !== null) {
    return Object.keys(value).map((key) => [key, shape((value as Record<string, unknown>)[key])]);
  }
  return value;
}

/** Valid JSON texts with one character inserted or replaced: most of them invalid. */
function nearValidJson() {
  const base = fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value));
  return fc
    .tuple(base, fc.nat(), fc.constantFrom("", ",", "]", "}", '"', "\\", ":", "x", "1", " ", "{"))
    .map(([text, at, insert]) => {
      const index = at % (text.length + 1);
      return `${text.slice(0, index)}${insert}${text.slice(index + (at % 2))}`;
    });
}

describe("parseJsonSteps", () => {
  it("returns what JSON.parse returns, member order included, for any value and slice size", () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 6 }),
        fc.integer({ min: 1, max: 200 }),
        fc.constantFrom(0, 2),
        (value, slice, indent) => {
          const text = JSON.stringify(value, null, indent);
          const result = sliced(text, slice).value;
          expect(shape(result)).toEqual(shape(JSON.parse(text)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("keeps JSON.parse's verdict on texts near valid JSON, the error message included", () => {
    const mutated = nearValidJson();
    fc.assert(
      fc.property(mutated, fc.integer({ min: 1, max: 40 }), (text, slice) => {
        expect(shape(outcome(text, slice))).toEqual(shape(native(text)));
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps duplicate keys as JSON.parse does: the last value, at the first key's place", () => {
    const text = `{"a":1,"b":[${"1,".repeat(50)}2],"a":{"c":[${"3,".repeat(50)}4]},"__proto__":[5]}`;
    const result = sliced(text, 16).value as Record<string, unknown>;
    expect(shape(result)).toEqual(shape(JSON.parse(text)));
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.hasOwn(result, "__proto__")).toBe(true);
  });

  it("pauses between slices of a long array, each slice parsed whole", () => {
    const records = Array.from({ length: 5000 }, (_, index) => ({
      path: `d/${index}.txt`,
      sha256: "sha256:0000",
      size: index,
    }));
    const text = JSON.stringify({ outputs: records, tail: "end" });
    const { value, pauses } = sliced(text, 4096);
    expect(value).toEqual({ outputs: records, tail: "end" });
    expect(pauses).toBeGreaterThan(text.length / 4096 - 1);
  });

  it("parses whatever it cannot take apart in one call: deep nesting, long strings and numbers", () => {
    const deep = `${"[".repeat(100)}1${"]".repeat(100)}`;
    expect(sliced(deep, 8).value).toEqual(JSON.parse(deep));
    const long = JSON.stringify({ text: "x".repeat(1000), list: ["y".repeat(300), 1.5e300] });
    expect(sliced(long, 10).value).toEqual(JSON.parse(long));
  });

  it("is JSON.parse itself for texts no longer than one slice", () => {
    expect(runSteps(parseJsonSteps('{"a":[1,2]}'))).toEqual({ a: [1, 2] });
    expect(() => runSteps(parseJsonSteps("{"))).toThrow(SyntaxError);
  });
});

/** The text cut into pieces of the given lengths (cycled), read with `parseJsonPiecesSteps`. */
function pieced(text: string, slice: number, lengths: readonly number[]) {
  let at = 0;
  let turn = 0;
  let wholeReads = 0;
  let longest = 0;
  const pieces = {
    next(): string | undefined {
      if (at >= text.length) return undefined;
      const length = Math.max(1, lengths[turn++ % lengths.length] ?? 1);
      const piece = text.slice(at, at + length);
      at += piece.length;
      return piece;
    },
  };
  const steps = parseJsonPiecesSteps(
    {
      pieces,
      whole: () => {
        wholeReads++;
        return text;
      },
    },
    slice,
  );
  try {
    for (;;) {
      const next = steps.next();
      if (next.done) return { value: next.value, wholeReads, longest };
      longest = Math.max(longest, at);
    }
  } catch (error) {
    return { error: (error as Error).message, wholeReads, longest };
  }
}

describe("parseJsonPiecesSteps", () => {
  it("returns what JSON.parse returns for any value, slice size and cut into pieces", () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 6 }),
        fc.integer({ min: 1, max: 200 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom(0, 2),
        (value, slice, lengths, indent) => {
          const text = JSON.stringify(value, null, indent);
          const result = pieced(text, slice, lengths);
          expect(shape(result.value)).toEqual(shape(JSON.parse(text)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("keeps JSON.parse's verdict, read from the whole text, on texts near valid JSON", () => {
    const mutated = nearValidJson();
    fc.assert(
      fc.property(
        mutated,
        fc.integer({ min: 1, max: 40 }),
        fc.nat({ max: 50 }),
        (text, slice, cut) => {
          const result = pieced(text, slice, [cut + 1]);
          const expected = native(text);
          if ("error" in expected) expect(result.error).toBe(expected.error);
          else expect(shape(result.value)).toEqual(shape(expected.value));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("asks for pieces as it reads, never far ahead, and never for the whole of a valid text", () => {
    const records = Array.from({ length: 20_000 }, (_, index) => ({
      path: `d/${index}.txt`,
      sha256: `sha256:${String(index).padStart(64, "0")}`,
      size: index,
    }));
    const text = JSON.stringify({ outputs: records, tail: "end" });
    let at = 0;
    const steps = parseJsonPiecesSteps(
      {
        pieces: {
          next() {
            if (at >= text.length) return undefined;
            const piece = text.slice(at, at + 10_000);
            at += piece.length;
            return piece;
          },
        },
        whole: () => {
          throw new Error("read whole");
        },
      },
      4096,
    );
    // Each pause comes after one slice was parsed: what was asked for by then is that slice,
    // the two slices the reader looks ahead, and the rest of the last piece.
    let pauses = 0;
    let previous = 0;
    let next = steps.next();
    for (; !next.done; next = steps.next()) {
      pauses++;
      expect(at - previous).toBeLessThanOrEqual(3 * 4096 + 10_000);
      previous = at;
    }
    expect(pauses).toBeGreaterThan(text.length / 4096 - 1);
    expect(next.value).toEqual({ outputs: records, tail: "end" });
  });
});

/** `parseStrictJsonSteps` run to its end with slices of `slice` characters. */
function strictSliced(text: string, slice: number): JsonValue {
  return runSteps(parseStrictJsonSteps(text, slice));
}

/** The strict parser's value or its message, as plain data (maps as member lists). */
function strictOutcome(parse: () => JsonValue): unknown {
  try {
    return { value: plain(parse()) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function plain(value: JsonValue): unknown {
  if (value instanceof Map) return [...value].map(([key, member]) => [key, plain(member)]);
  if (Array.isArray(value)) return value.map(plain);
  if (typeof value === "object" && value !== null) return { number: value.text };
  return value;
}

describe("parseStrictJsonSteps", () => {
  it("returns what parseStrictJson returns, or its very error, for texts near valid JSON", () => {
    const base = fc
      .jsonValue({ maxDepth: 5 })
      .chain((value) => fc.constantFrom(JSON.stringify(value), JSON.stringify(value, null, 2)));
    const mutated = fc
      .tuple(
        base,
        fc.nat(),
        fc.constantFrom("", ",", "]", "}", '"', "\\", ":", "1.0", "{", '"a":1,'),
      )
      .map(([text, at, insert]) => {
        const index = at % (text.length + 1);
        return `${text.slice(0, index)}${insert}${text.slice(index + (at % 2))}`;
      });
    fc.assert(
      fc.property(fc.oneof(base, mutated), fc.integer({ min: 1, max: 60 }), (text, slice) => {
        expect(strictOutcome(() => strictSliced(text, slice))).toEqual(
          strictOutcome(() => parseStrictJson(text)),
        );
      }),
      { numRuns: 2000 },
    );
  });

  it("reports a duplicate key of a long object, and nesting past the bound, as the whole parse does", () => {
    const duplicate = `{"files":[${'{"a":1},'.repeat(40)}{"a":2}],"id":"x","files":[]}`;
    expect(strictOutcome(() => strictSliced(duplicate, 16))).toEqual(
      strictOutcome(() => parseStrictJson(duplicate)),
    );
    expect(strictOutcome(() => strictSliced(duplicate, 16))).toMatchObject({
      error: expect.stringContaining('duplicate key "files"'),
    });
    const deep = `${'{"a":['.repeat(40)}${"1,".repeat(30)}1${"]}".repeat(40)}`;
    expect(strictOutcome(() => strictSliced(deep, 8))).toEqual(
      strictOutcome(() => parseStrictJson(deep)),
    );
    expect(strictOutcome(() => strictSliced(deep, 8))).toMatchObject({
      error: expect.stringContaining("nesting deeper than 64 levels"),
    });
  });
});
