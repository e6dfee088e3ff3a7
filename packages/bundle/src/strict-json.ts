/**
 * A strict RFC 8259 JSON parser for manifests. `JSON.parse` silently keeps the last of duplicate
 * keys and turns `16.0` or `1e1` into the integer 16; distributor's documents must be unambiguous,
 * so this parser rejects duplicate keys and hands numbers back as their source text.
 */

/** A JSON number kept as written, so callers can insist on integers (`16`, not `16.0` or `1.6e1`). */
export class JsonNumber {
  constructor(readonly text: string) {}
  get value(): number {
    return Number(this.text);
  }
}

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
/** Objects keep their members in document order. */
export type JsonObject = Map<string, JsonValue>;

export class JsonSyntaxError extends Error {
  override name = "JsonSyntaxError";
  constructor(
    readonly reason: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(`invalid JSON at line ${line} column ${column}: ${reason}`);
  }
}

/** Documents this deep are not distributor documents; the bound keeps recursion off the stack limit. */
export const MAX_JSON_DEPTH = 64;

/**
 * Parses `text` as one JSON document. `depth` is the number of arrays and objects around it, when
 * it is a part of a larger document read in slices: the nesting bound counts them too.
 */
export function parseStrictJson(text: string, depth = 0): JsonValue {
  return new Parser(text, depth).document();
}

class Parser {
  private position = 0;

  constructor(
    private readonly text: string,
    private depth: number,
  ) {}

  document(): JsonValue {
    if (this.text.charCodeAt(0) === 0xfeff) this.fail("byte order mark before the document");
    this.whitespace();
    const value = this.value();
    this.whitespace();
    if (this.position < this.text.length) this.fail("trailing data after the document");
    return value;
  }

  private value(): JsonValue {
    const char = this.text[this.position];
    switch (char) {
      case "{":
        return this.object();
      case "[":
        return this.array();
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      case undefined:
        return this.fail("unexpected end of input");
      default:
        if (char === "-" || (char >= "0" && char <= "9")) return this.number();
        return this.fail(`unexpected character ${describe(char)}`);
    }
  }

  private object(): JsonObject {
    this.enter();
    this.position++;
    const members: JsonObject = new Map();
    this.whitespace();
    if (this.text[this.position] === "}") {
      this.position++;
      this.depth--;
      return members;
    }
    for (;;) {
      this.whitespace();
      if (this.text[this.position] !== '"') this.fail("expected a string key");
      const keyStart = this.position;
      const key = this.string();
      if (members.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`, keyStart);
      this.whitespace();
      this.expect(":");
      this.whitespace();
      members.set(key, this.value());
      this.whitespace();
      const next = this.text[this.position];
      this.position++;
      if (next === "}") break;
      if (next !== ",") this.fail("expected , or } in object", this.position - 1);
    }
    this.depth--;
    return members;
  }

  private array(): JsonValue[] {
    this.enter();
    this.position++;
    const items: JsonValue[] = [];
    this.whitespace();
    if (this.text[this.position] === "]") {
      this.position++;
      this.depth--;
      return items;
    }
    for (;;) {
      this.whitespace();
      items.push(this.value());
      this.whitespace();
      const next = this.text[this.position];
      this.position++;
      if (next === "]") break;
      if (next !== ",") this.fail("expected , or ] in array", this.position - 1);
    }
    this.depth--;
    return items;
  }

  private string(): string {
    const start = this.position;
    this.position++;
    let result = "";
    let chunkStart = this.position;
    for (;;) {
      const code = this.text.charCodeAt(this.position);
      if (Number.isNaN(code)) this.fail("unterminated string", start);
      if (code === 0x22) break;
      if (code < 0x20) this.fail("control character in string");
      if (code === 0x5c) {
        result += this.text.slice(chunkStart, this.position);
        result += this.escape();
        chunkStart = this.position;
        continue;
      }
      this.position++;
    }
    result += this.text.slice(chunkStart, this.position);
    this.position++;
    return result;
  }

  private escape(): string {
    const char = this.text[this.position + 1];
    this.position += 2;
    switch (char) {
      case '"':
        return '"';
      case "\\":
        return "\\";
      case "/":
        return "/";
      case "b":
        return "\b";
      case "f":
        return "\f";
      case "n":
        return "\n";
      case "r":
        return "\r";
      case "t":
        return "\t";
      case "u": {
        const hex = this.text.slice(this.position, this.position + 4);
        if (!/^[0-9A-Fa-f]{4}$/.test(hex)) this.fail("invalid \\u escape", this.position - 2);
        this.position += 4;
        return String.fromCharCode(Number.parseInt(hex, 16));
      }
      default:
        return this.fail("invalid escape", this.position - 2);
    }
  }

  private number(): JsonNumber {
    const match = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    match.lastIndex = this.position;
    const found = match.exec(this.text);
    if (found === null) return this.fail("invalid number");
    this.position += found[0].length;
    const next = this.text[this.position];
    // `01`, `1.` and `1e` stop the grammar early; the leftover must not continue the token.
    if (next !== undefined && /[0-9.eE+-]/.test(next)) this.fail("invalid number");
    return new JsonNumber(found[0]);
  }

  private literal<T extends boolean | null>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.position)) {
      this.fail(`unexpected character ${describe(this.text[this.position] ?? "")}`);
    }
    this.position += word.length;
    return value;
  }

  private whitespace(): void {
    for (;;) {
      const code = this.text.charCodeAt(this.position);
      if (code !== 0x20 && code !== 0x0a && code !== 0x0d && code !== 0x09) return;
      this.position++;
    }
  }

  private expect(char: string): void {
    if (this.text[this.position] !== char) this.fail(`expected ${char}`);
    this.position++;
  }

  private enter(): void {
    this.depth++;
    if (this.depth > MAX_JSON_DEPTH) this.fail(`nesting deeper than ${MAX_JSON_DEPTH} levels`);
  }

  private fail(reason: string, at = this.position): never {
    const before = this.text.slice(0, Math.min(at, this.text.length));
    const lastNewline = before.lastIndexOf("\n");
    let line = 1;
    for (let index = before.indexOf("\n"); index !== -1; index = before.indexOf("\n", index + 1)) {
      line++;
    }
    throw new JsonSyntaxError(reason, line, at - lastNewline);
  }
}

function describe(char: string): string {
  if (char === "") return "end of input";
  const code = char.charCodeAt(0);
  if (code < 0x20 || code === 0x7f || code === 0xfeff) {
    return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  }
  return JSON.stringify(char);
}
