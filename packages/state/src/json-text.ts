const PIECES_PER_CHUNK = 4096;

/**
 * Writes the text `JSON.stringify(document, null, 2)` would, member by member, without building
 * the document first. A state recording 20 000 outputs is about 10 MB of text; building it as
 * objects and stringifying them allocated three times that in short-lived garbage, and the peak
 * memory of a large publish was reached right there.
 *
 * Callers open and end containers in order; `member` writes one scalar, `rendered` splices in
 * a value that is already `JSON.stringify(value, null, 2)` text (the embedded manifest).
 */
export class JsonText {
  /** Pieces not yet joined; joined into `#chunks` every `PIECES_PER_CHUNK`, so they die young. */
  #parts: string[] = [];
  readonly #chunks: string[] = [];
  /** Per open container: whether it has a member yet, and its closing bracket. */
  readonly #open: { filled: boolean; close: "}" | "]" }[] = [];
  #indent = "";

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
    this.#indent = this.#indent.slice(2);
    // An empty container renders as `{}` / `[]`, as JSON.stringify renders it.
    this.#parts.push(container.filled ? `\n${this.#indent}${container.close}` : container.close);
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

  /** A member whose value is given as `JSON.stringify(value, null, 2)` text (a trailing newline is dropped). */
  rendered(key: string | undefined, text: string): this {
    this.#prefix(key);
    const body = text.endsWith("\n") ? text.slice(0, -1) : text;
    this.#parts.push(body.replaceAll("\n", `\n${this.#indent}`));
    return this;
  }

  /** The finished text with a trailing newline; every container must be ended. */
  text(): string {
    if (this.#open.length > 0) throw new Error("JsonText: container not ended");
    this.#chunks.push(this.#parts.join(""), "\n");
    this.#parts = [];
    return this.#chunks.join("");
  }

  #openContainer(key: string | undefined, open: "{" | "[", close: "}" | "]"): this {
    if (this.#open.length > 0) this.#prefix(key);
    this.#parts.push(open);
    this.#open.push({ filled: false, close });
    this.#indent += "  ";
    return this;
  }

  #prefix(key: string | undefined): void {
    if (this.#parts.length >= PIECES_PER_CHUNK) {
      this.#chunks.push(this.#parts.join(""));
      this.#parts = [];
    }
    const container = this.#open.at(-1);
    if (container === undefined) throw new Error("JsonText: a member needs an open container");
    this.#parts.push(container.filled ? ",\n" : "\n", this.#indent);
    container.filled = true;
    if (key !== undefined) this.#parts.push(JSON.stringify(key), ": ");
  }
}
