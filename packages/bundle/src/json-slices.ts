import type { Steps } from "@distributor/storage";
import { JsonSyntaxError, type JsonValue, MAX_JSON_DEPTH, parseStrictJson } from "./strict-json.js";

/**
 * Characters of JSON text handed to one parse call: a value (or a run of array elements) this
 * short is parsed in one step, well under a millisecond natively.
 */
export const JSON_SLICE_CHARS = 64 * 1024;

/** Members of one long object read between two pauses. */
const MEMBERS_PER_STEP = 1024;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Text the sliced reader cannot take apart; the caller parses it whole for the parser's verdict. */
class NotSliceable extends Error {}

/** How one parser reads JSON: the sliced reader parses the short parts with it. */
interface JsonFlavour {
  /** Parses a whole text; `depth` arrays and objects of the document enclose it. */
  parse(text: string, depth: number): unknown;
  /** A new empty object. */
  object(): unknown;
  /** Sets `key` of `object`; false when the flavour refuses it (a duplicate key, strictly). */
  set(object: unknown, key: string, value: unknown): boolean;
  /** Whether `error` is the parser's verdict on invalid text. */
  rejects(error: unknown): boolean;
}

const NATIVE: JsonFlavour = {
  parse: (text) => JSON.parse(text),
  object: () => ({}),
  set(object, key, value) {
    // `JSON.parse` makes `__proto__` an own member; an assignment would set the prototype.
    Object.defineProperty(object, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
    return true;
  },
  rejects: (error) => error instanceof SyntaxError,
};

const STRICT: JsonFlavour = {
  parse: (text, depth) => parseStrictJson(text, depth),
  object: () => new Map(),
  set(object, key, value) {
    const members = object as Map<string, unknown>;
    if (members.has(key)) return false;
    members.set(key, value);
    return true;
  },
  rejects: (error) => error instanceof JsonSyntaxError,
};

/**
 * `JSON.parse(text)` in steps: a document longer than `sliceChars` is taken apart along its long
 * objects and arrays, and each run of short values is parsed by one native `JSON.parse` call, with
 * a pause (`yield`) after each, so a 300 MB state never holds the caller's event loop for
 * seconds. The value is the one `JSON.parse` returns (member order, the last of duplicate keys,
 * `__proto__` as an own key). Text that is not one valid JSON value, and documents nested deeper
 * than `MAX_JSON_DEPTH`, are parsed whole, so that errors are exactly `JSON.parse`'s own.
 */
export function parseJsonSteps(text: string, sliceChars = JSON_SLICE_CHARS): Steps<unknown> {
  return slicedSteps(NATIVE, text, sliceChars);
}

/**
 * `parseStrictJson(text)` in steps, as `parseJsonSteps` is `JSON.parse`'s: the same value, and for
 * text the strict parser rejects (a duplicate key included), its own error, line and column.
 */
export function parseStrictJsonSteps(
  text: string,
  sliceChars = JSON_SLICE_CHARS,
): Steps<JsonValue> {
  return slicedSteps(STRICT, text, sliceChars) as Steps<JsonValue>;
}

function* slicedSteps(flavour: JsonFlavour, text: string, sliceChars: number): Steps<unknown> {
  if (text.length > sliceChars) {
    try {
      return yield* new SlicedReader(flavour, text, sliceChars).document();
    } catch (error) {
      if (!(error instanceof NotSliceable) && !flavour.rejects(error)) throw error;
    }
  }
  return flavour.parse(text, 0);
}

class SlicedReader {
  private position = 0;
  /** Long arrays and objects around `position`, taken apart. */
  private depth = 0;

  constructor(
    private readonly flavour: JsonFlavour,
    private readonly text: string,
    private readonly sliceChars: number,
  ) {}

  *document(): Steps<unknown> {
    this.whitespace();
    const value = yield* this.value();
    this.whitespace();
    if (this.position !== this.text.length) throw new NotSliceable();
    return value;
  }

  /** The value at `position`, which is left just past it. */
  private *value(): Steps<unknown> {
    const start = this.position;
    const end = this.valueEnd(start, Math.min(this.text.length, start + this.sliceChars));
    if (end >= 0) {
      this.position = end;
      return this.flavour.parse(this.text.slice(start, end), this.depth);
    }
    if (++this.depth > MAX_JSON_DEPTH) throw new NotSliceable();
    let value: unknown;
    switch (this.text.charCodeAt(start)) {
      case OPEN_BRACE:
        value = yield* this.object();
        break;
      case OPEN_BRACKET:
        value = yield* this.array();
        break;
      case QUOTE: {
        // One string longer than a slice: nothing to take apart.
        const close = this.stringEnd(start);
        if (close < 0) throw new NotSliceable();
        this.position = close + 1;
        value = this.flavour.parse(this.text.slice(start, close + 1), this.depth);
        break;
      }
      default:
        throw new NotSliceable();
    }
    this.depth--;
    return value;
  }

  private *object(): Steps<unknown> {
    const result = this.flavour.object();
    this.position++;
    this.whitespace();
    if (this.text.charCodeAt(this.position) === CLOSE_BRACE) {
      this.position++;
      return result;
    }
    for (let members = 1; ; members++) {
      if (members % MEMBERS_PER_STEP === 0) yield;
      const keyStart = this.position;
      if (this.text.charCodeAt(keyStart) !== QUOTE) throw new NotSliceable();
      const keyEnd = this.stringEnd(keyStart);
      if (keyEnd < 0) throw new NotSliceable();
      const key = this.flavour.parse(this.text.slice(keyStart, keyEnd + 1), this.depth) as string;
      this.position = keyEnd + 1;
      this.whitespace();
      this.expect(COLON);
      this.whitespace();
      if (!this.flavour.set(result, key, yield* this.value())) throw new NotSliceable();
      this.whitespace();
      if (this.text.charCodeAt(this.position) === CLOSE_BRACE) {
        this.position++;
        return result;
      }
      this.expect(COMMA);
      this.whitespace();
    }
  }

  /** Runs of elements that fit a slice are parsed together, as the array text `[…]` they are. */
  private *array(): Steps<unknown[]> {
    const result: unknown[] = [];
    const { text } = this;
    this.position++;
    this.whitespace();
    if (text.charCodeAt(this.position) === CLOSE_BRACKET) {
      this.position++;
      return result;
    }
    let runStart = -1;
    let runEnd = -1;
    const flush = () => {
      if (runStart < 0) return;
      // The brackets around the run stand for this array, counted in `depth` already.
      const values = this.flavour.parse(`[${text.slice(runStart, runEnd)}]`, this.depth - 1);
      if (!Array.isArray(values)) throw new NotSliceable();
      for (const value of values) result.push(value);
      runStart = -1;
    };
    for (;;) {
      const start = this.position;
      const limit = Math.min(text.length, (runStart < 0 ? start : runStart) + this.sliceChars);
      const end = this.valueEnd(start, limit);
      if (end >= 0) {
        if (runStart < 0) runStart = start;
        runEnd = end;
        this.position = end;
      } else if (runStart >= 0) {
        // The run is full: parse it, then look at this element again with a slice of its own.
        flush();
        yield;
        continue;
      } else {
        result.push(yield* this.value());
      }
      this.whitespace();
      const next = text.charCodeAt(this.position);
      if (next === CLOSE_BRACKET) {
        flush();
        this.position++;
        return result;
      }
      this.expect(COMMA);
      this.whitespace();
    }
  }

  /**
   * The index just past the value starting at `start` when it ends before `limit`, else -1.
   * Only brackets and strings are followed: `JSON.parse` checks everything else of the text.
   */
  private valueEnd(start: number, limit: number): number {
    const { text } = this;
    const first = text.charCodeAt(start);
    if (first === QUOTE) {
      const close = this.stringEnd(start);
      if (close < 0) throw new NotSliceable();
      return close < limit ? close + 1 : -1;
    }
    if (first === OPEN_BRACE || first === OPEN_BRACKET) {
      let depth = 0;
      for (let index = start; index < limit; index++) {
        const char = text.charCodeAt(index);
        if (char === QUOTE) {
          index = this.stringEnd(index);
          if (index < 0) throw new NotSliceable();
        } else if (char === OPEN_BRACE || char === OPEN_BRACKET) {
          depth++;
        } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
          if (--depth === 0) return index + 1;
        }
      }
      return -1;
    }
    let index = start;
    while (index < limit && !isDelimiter(text.charCodeAt(index))) index++;
    if (index === start) throw new NotSliceable();
    // Cut by the limit: a number running past it is looked at again with a slice of its own.
    return index === limit && limit < text.length ? -1 : index;
  }

  /** Index of the quote closing the string that opens at `open`, or -1 when none does. */
  private stringEnd(open: number): number {
    const { text } = this;
    let from = open + 1;
    for (;;) {
      const close = text.indexOf('"', from);
      if (close < 0) return -1;
      let backslashes = 0;
      while (text.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) return close;
      from = close + 1;
    }
  }

  private whitespace(): void {
    const { text } = this;
    while (isWhitespace(text.charCodeAt(this.position))) this.position++;
  }

  private expect(char: number): void {
    if (this.text.charCodeAt(this.position) !== char) throw new NotSliceable();
    this.position++;
  }
}

function isWhitespace(char: number): boolean {
  return char === 0x20 || char === 0x0a || char === 0x0d || char === 0x09;
}

function isDelimiter(char: number): boolean {
  return char === COMMA || char === CLOSE_BRACE || char === CLOSE_BRACKET || isWhitespace(char);
}
