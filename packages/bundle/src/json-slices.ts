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
export function parseJsonSteps(
  text: string,
  sliceChars = JSON_SLICE_CHARS,
  elements?: ElementHook,
): Steps<unknown> {
  return slicedSteps(NATIVE, text, sliceChars, elements);
}

/**
 * Sees each element of a long array (one taken apart) as it is parsed, and returns what the array
 * keeps instead: a reader that converts elements one by one lets each parsed element go at once
 * rather than holding the whole decoded array too. `keys` are the object members that lead from
 * the root to the array (`["source", "manifest", "files"]`; an array inside an array adds `""`).
 * Elements of short arrays, parsed as part of a larger value, are not shown: the hook only saves
 * memory, it must not change what the value means.
 */
export type ElementHook = (keys: readonly string[], index: number, value: unknown) => unknown;

/**
 * `parseStrictJson(text)` in steps, as `parseJsonSteps` is `JSON.parse`'s: the same value, and for
 * text the strict parser rejects (a duplicate key included), its own error, line and column.
 */
export function parseStrictJsonSteps(
  text: string,
  sliceChars = JSON_SLICE_CHARS,
): Steps<JsonValue> {
  return slicedSteps(STRICT, text, sliceChars, undefined) as Steps<JsonValue>;
}

/**
 * JSON text handed over in pieces, in order: `next()` gives the next piece, undefined after the
 * last. A piece ends between two UTF-16 units of the text, anywhere. A source that reads its
 * pieces asynchronously answers `null` while the next one is not there yet: the reader then
 * pauses (its steps yield) and asks again when resumed, so its driver loads a piece meanwhile
 * (`StreamedUtf8Pieces` with `runWithStreamedPieces`).
 */
export interface TextPieces {
  next(): string | undefined | null;
}

/** Pieces that are always there when asked for (read from bytes in memory, say). */
export interface ReadyPieces extends TextPieces {
  next(): string | undefined;
}

/** A JSON text read piece by piece, and the whole of it for the parser's verdict on a failure. */
export interface PiecedJson {
  pieces: TextPieces;
  /**
   * The whole text, read again: only called when the pieces cannot be read in slices (invalid
   * JSON, nesting deeper than `MAX_JSON_DEPTH`, a string or a run of whitespace longer than a
   * slice), so that the outcome, an error included, is exactly the parser's own.
   */
  whole(): string;
}

/**
 * `JSON.parse` of a text given in pieces, in steps: the value `parseJsonSteps` gives for the whole
 * text, while only a window of it (a piece and two slices) is held at a time. A 373 MB state is
 * never one string.
 */
export function parseJsonPiecesSteps(
  json: PiecedJson,
  sliceChars = JSON_SLICE_CHARS,
  elements?: ElementHook,
): Steps<unknown> {
  return piecedSteps(NATIVE, json, sliceChars, elements);
}

function* slicedSteps(
  flavour: JsonFlavour,
  text: string,
  sliceChars: number,
  elements: ElementHook | undefined,
): Steps<unknown> {
  if (text.length > sliceChars) {
    try {
      const window = new TextWindow(text);
      return yield* new SlicedReader(flavour, window, sliceChars, elements).document();
    } catch (error) {
      if (!(error instanceof NotSliceable) && !flavour.rejects(error)) throw error;
    }
  }
  return flavour.parse(text, 0);
}

function* piecedSteps(
  flavour: JsonFlavour,
  json: PiecedJson,
  sliceChars: number,
  elements: ElementHook | undefined,
): Steps<unknown> {
  try {
    const window = new TextWindow("", json.pieces);
    return yield* new SlicedReader(flavour, window, sliceChars, elements).document();
  } catch (error) {
    if (!(error instanceof NotSliceable) && !flavour.rejects(error)) throw error;
  }
  return flavour.parse(json.whole(), 0);
}

/**
 * The part of a text a reader looks at: `text` holds the text from index `base` on, up to `end`.
 * A whole text is one window that has `ended`; pieces are loaded as the reader moves on, and what
 * lies before the reader's earliest unread position is dropped as they are.
 */
class TextWindow {
  base = 0;
  ended: boolean;

  constructor(
    public text: string,
    private readonly pieces?: TextPieces,
  ) {
    this.ended = pieces === undefined;
  }

  get end(): number {
    return this.base + this.text.length;
  }

  /**
   * Loads pieces until the window reaches `until` or the text ended, dropping what lies before
   * `keep`; false when the source has no piece ready yet (call again once it has).
   */
  fill(until: number, keep: number): boolean {
    if (this.ended || this.end >= until || this.pieces === undefined) return true;
    const drop = Math.max(0, keep - this.base);
    const parts = [drop > 0 ? this.text.slice(drop) : this.text];
    this.base += drop;
    let end = this.end;
    let ready = true;
    while (end < until) {
      const piece = this.pieces.next();
      if (piece === null) {
        ready = false;
        break;
      }
      if (piece === undefined) {
        this.ended = true;
        break;
      }
      parts.push(piece);
      end += piece.length;
    }
    // One new flat string: the dropped text is not kept alive by a slice of it.
    this.text = parts.join("");
    return ready;
  }
}

class SlicedReader {
  private position = 0;
  /** Long arrays and objects around `position`, taken apart. */
  private depth = 0;

  constructor(
    private readonly flavour: JsonFlavour,
    private readonly window: TextWindow,
    private readonly sliceChars: number,
    private readonly elements: ElementHook | undefined,
  ) {}

  /** Object members from the root to the value being read (`""` for an array's element). */
  private readonly keys: string[] = [];

  *document(): Steps<unknown> {
    yield* this.ahead();
    this.whitespace();
    const value = yield* this.value();
    // Whatever follows must be whitespace to the end of the text: read a piece at a time, each
    // dropped once looked at (a valid text may end in megabytes of spaces).
    for (;;) {
      this.whitespace();
      if (this.position < this.window.end) throw new NotSliceable();
      if (this.window.ended) return value;
      while (!this.window.fill(this.position + 1, this.position)) yield;
    }
  }

  /**
   * Makes sure the window holds two slices past `position` (or the rest of the text): every
   * scan below looks at most one slice ahead of the position it starts from, and a step moves on
   * by one slice at most.
   */
  private *ahead(keep = this.position): Steps<void> {
    while (!this.window.fill(this.position + 2 * this.sliceChars, keep)) yield;
  }

  private code(index: number): number {
    return this.window.text.charCodeAt(index - this.window.base);
  }

  private cut(start: number, end: number): string {
    const { base, text } = this.window;
    return text.slice(start - base, end - base);
  }

  /** The value at `position`, which is left just past it. */
  private *value(): Steps<unknown> {
    yield* this.ahead();
    const start = this.position;
    const end = this.valueEnd(start, Math.min(this.window.end, start + this.sliceChars));
    if (end >= 0) {
      this.position = end;
      return this.flavour.parse(this.cut(start, end), this.depth);
    }
    if (++this.depth > MAX_JSON_DEPTH) throw new NotSliceable();
    let value: unknown;
    switch (this.code(start)) {
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
        value = this.flavour.parse(this.cut(start, close + 1), this.depth);
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
    if (this.code(this.position) === CLOSE_BRACE) {
      this.position++;
      return result;
    }
    for (let members = 1; ; members++) {
      if (members % MEMBERS_PER_STEP === 0) yield;
      yield* this.ahead();
      const keyStart = this.position;
      if (this.code(keyStart) !== QUOTE) throw new NotSliceable();
      const keyEnd = this.stringEnd(keyStart);
      if (keyEnd < 0) throw new NotSliceable();
      const key = this.flavour.parse(this.cut(keyStart, keyEnd + 1), this.depth) as string;
      this.position = keyEnd + 1;
      this.whitespace();
      this.expect(COLON);
      this.whitespace();
      this.keys.push(key);
      const value = yield* this.value();
      this.keys.pop();
      if (!this.flavour.set(result, key, value)) throw new NotSliceable();
      yield* this.ahead();
      this.whitespace();
      if (this.code(this.position) === CLOSE_BRACE) {
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
    this.position++;
    this.whitespace();
    if (this.code(this.position) === CLOSE_BRACKET) {
      this.position++;
      return result;
    }
    let runStart = -1;
    let runEnd = -1;
    const { elements, keys } = this;
    const keep =
      elements === undefined
        ? (value: unknown) => result.push(value)
        : (value: unknown) => result.push(elements(keys, result.length, value));
    const flush = () => {
      if (runStart < 0) return;
      // The brackets around the run stand for this array, counted in `depth` already.
      const values = this.flavour.parse(`[${this.cut(runStart, runEnd)}]`, this.depth - 1);
      if (!Array.isArray(values)) throw new NotSliceable();
      for (const value of values) keep(value);
      runStart = -1;
    };
    for (;;) {
      yield* this.ahead(runStart < 0 ? this.position : runStart);
      const start = this.position;
      const limit = Math.min(this.window.end, (runStart < 0 ? start : runStart) + this.sliceChars);
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
        keys.push("");
        const value = yield* this.value();
        keys.pop();
        keep(value);
      }
      yield* this.ahead(runStart < 0 ? this.position : runStart);
      this.whitespace();
      const next = this.code(this.position);
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
    const { text, base } = this.window;
    const first = text.charCodeAt(start - base);
    if (first === QUOTE) {
      const close = this.stringEnd(start);
      if (close < 0) throw new NotSliceable();
      return close < limit ? close + 1 : -1;
    }
    if (first === OPEN_BRACE || first === OPEN_BRACKET) {
      let depth = 0;
      for (let index = start - base; index < limit - base; index++) {
        const char = text.charCodeAt(index);
        if (char === QUOTE) {
          const close = this.stringEnd(index + base);
          if (close < 0) throw new NotSliceable();
          index = close - base;
        } else if (char === OPEN_BRACE || char === OPEN_BRACKET) {
          depth++;
        } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
          if (--depth === 0) return index + base + 1;
        }
      }
      return -1;
    }
    let index = start - base;
    while (index < limit - base && !isDelimiter(text.charCodeAt(index))) index++;
    if (index === start - base) throw new NotSliceable();
    // Cut by the limit: a number running past it is looked at again with a slice of its own.
    const more = !this.window.ended || limit < this.window.end;
    return index === limit - base && more ? -1 : index + base;
  }

  /**
   * Index of the quote closing the string that opens at `open`, or -1 when none does in the
   * window (a string longer than the window is read whole by the caller's fallback).
   */
  private stringEnd(open: number): number {
    const { text, base } = this.window;
    let from = open - base + 1;
    for (;;) {
      const close = text.indexOf('"', from);
      if (close < 0) return -1;
      let backslashes = 0;
      while (text.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) return close + base;
      from = close + 1;
    }
  }

  private whitespace(): void {
    while (isWhitespace(this.code(this.position))) this.position++;
  }

  private expect(char: number): void {
    if (this.code(this.position) !== char) throw new NotSliceable();
    this.position++;
  }
}

function isWhitespace(char: number): boolean {
  return char === 0x20 || char === 0x0a || char === 0x0d || char === 0x09;
}

function isDelimiter(char: number): boolean {
  return char === COMMA || char === CLOSE_BRACE || char === CLOSE_BRACKET || isWhitespace(char);
}
