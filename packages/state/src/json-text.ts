const PIECES_PER_CHUNK = 4096;

/**
 * Writes the text `JSON.stringify(document)` would, member by member, without building the
 * document first. A state recording 20 000 outputs is about 7 MB of text; building it as objects
 * and stringifying them allocated three times that in short-lived garbage, and the peak memory of
 * a large publish was reached right there.
 *
 * Callers open and end containers in order; `member` writes one scalar, `rendered` splices in
 * a value that is already `JSON.stringify(value, null, 2)` text (the embedded manifest).
 */
export class JsonText {
  /** Pieces not yet joined; joined into a chunk every `PIECES_PER_CHUNK`, so they die young. */
  #parts: string[] = [];
  /** Joined chunks, kept as text; or, when encoding, already written into `#bytes`. */
  readonly #chunks: string[] = [];
  readonly #bytes: ByteBuffer | undefined;

  /** Per open container: whether it has a member yet, and its closing bracket. */
  readonly #open: { filled: boolean; close: "}" | "]" }[] = [];

  /** With `encode`, the text is written as UTF-8 bytes as it goes, and read with `bytes()`. */
  constructor(options: { encode?: boolean } = {}) {
    this.#bytes = options.encode ? new ByteBuffer() : undefined;
  }

  /** Opens the root object, or an object member (`key` inside an object, none inside an array). */
  openObject(key?: string): this {
    return this.#openContainer(key, "{", "}");
  }

  openArray(key?: string): this {
    return this.#openContainer(key, "[", "]");
  }

  end(): this {
    const container = this.#open.pop();
    if (container === undefined) throw new Error("JsonText: nothing to end");
    this.#parts.push(container.close);
    return this;
  }

  /** A string, number or boolean member. */
  member(key: string | undefined, value: string | number | boolean): this {
    // Anything else would render differently (objects) or not at all (functions, symbols).
    const kind = typeof value;
    if (kind !== "string" && kind !== "number" && kind !== "boolean") {
      throw new TypeError(
        `JsonText: member ${JSON.stringify(key)} must be a string, number or boolean, got ${kind}`,
      );
    }
    this.#prefix(key);
    this.#parts.push(JSON.stringify(value));
    return this;
  }

  /** A member whose value is given as `JSON.stringify(value, null, 2)` text, written compact. */
  rendered(key: string | undefined, text: string): this {
    this.#prefix(key);
    this.#parts.push(compactIndented(text));
    return this;
  }

  /** The finished text with a trailing newline; every container must be ended. */
  text(): string {
    if (this.#bytes !== undefined) throw new Error("JsonText: an encoding writer gives bytes()");
    this.#finish();
    return this.#chunks.join("");
  }

  /**
   * The finished text as UTF-8 bytes, for a writer made with `encode`. Each chunk was encoded
   * when it was joined, so the whole text never exists as one string: for 20 000 outputs that
   * is 10 MB of chunks and 10 MB of joined text the collector does not have to find.
   */
  bytes(): Uint8Array {
    if (this.#bytes === undefined) throw new Error("JsonText: a text writer gives text()");
    this.#finish();
    return this.#bytes.contents();
  }

  #finish(): void {
    if (this.#open.length > 0) throw new Error("JsonText: container not ended");
    this.#flush();
    this.#keep("\n");
  }

  #flush(): void {
    this.#keep(this.#parts.join(""));
    this.#parts = [];
  }

  #keep(chunk: string): void {
    if (this.#bytes === undefined) this.#chunks.push(chunk);
    else this.#bytes.write(chunk);
  }

  #openContainer(key: string | undefined, open: "{" | "[", close: "}" | "]"): this {
    if (this.#open.length > 0) this.#prefix(key);
    this.#parts.push(open);
    this.#open.push({ filled: false, close });
    return this;
  }

  #prefix(key: string | undefined): void {
    if (this.#parts.length >= PIECES_PER_CHUNK) this.#flush();
    const container = this.#open.at(-1);
    if (container === undefined) throw new Error("JsonText: a member needs an open container");
    if (container.filled) this.#parts.push(",");
    container.filled = true;
    if (key !== undefined) this.#parts.push(JSON.stringify(key), ":");
  }
}

/**
 * Every line break of `JSON.stringify(value, null, 2)` text is followed by its indent, and every
 * key starts a line and is followed by `": "`; no string holds a raw line break. So removing each
 * line break with its indent, and the space after a key that starts a line, gives exactly
 * `JSON.stringify(value)`. A string element of an array also starts a line, but is never
 * followed by `: `. One native pass, no parse: the embedded manifest of a million files is
 * over 100 MB of text.
 */
function compactIndented(text: string): string {
  return text.replace(/\n +(?:("(?:[^"\\\n]|\\.)*"): )?|\n/g, (_, key: string | undefined) =>
    key === undefined ? "" : `${key}:`,
  );
}

/**
 * A growing byte buffer. It doubles when a chunk might not fit (a UTF-16 unit is at most three
 * UTF-8 bytes). Chunks are encoded one by one, which gives the bytes of the whole text only
 * because a chunk never ends inside a surrogate pair: chunks are joined from whole pieces, each
 * `JSON.stringify` output (which escapes lone surrogates) or ASCII punctuation.
 */
class ByteBuffer {
  #buffer = Buffer.allocUnsafe(64 * 1024);
  #length = 0;

  write(chunk: string): void {
    const worst = this.#length + chunk.length * 3;
    if (worst > this.#buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(worst, this.#buffer.length * 2));
      this.#buffer.copy(grown, 0, 0, this.#length);
      this.#buffer = grown;
    }
    this.#length += this.#buffer.write(chunk, this.#length, "utf8");
  }

  /**
   * The bytes written: a view (offset 0, exact length) on the buffer, as a small `Buffer.from` is
   * a view on Node's shared pool. The spare capacity behind it was never written (its pages are
   * not resident unless the allocator reused memory) and is not part of the view; copying the
   * bytes out instead raised the peak of a 20 000-file publish by 8 MiB.
   */
  contents(): Uint8Array {
    return this.#buffer.subarray(0, this.#length);
  }
}
