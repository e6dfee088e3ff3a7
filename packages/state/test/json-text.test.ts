import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { JsonText } from "../src/json-text.js";

/** Indented text, as a manifest file holds it: what `rendered` is given. */
const rendered = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
/** What JsonText writes. */
const compact = (value: unknown) => `${JSON.stringify(value)}\n`;

describe("JsonText", () => {
  it("renders what JSON.stringify renders: nesting, empty containers, escapes", () => {
    const odd = 'quote " backslash \\ tab \t newline \n nul \u0000 ü 雪 😀 lone \ud800';
    const json = new JsonText()
      .openObject()
      .member("n", 2)
      .member("negative", -1.5)
      .member("flag", false)
      .member(odd, odd)
      .openObject("empty object")
      .end()
      .openArray("empty array")
      .end()
      .openArray("list")
      .member(undefined, "a")
      .openObject()
      .member("deep", 1)
      .openArray("deeper")
      .openArray()
      .end()
      .end()
      .end()
      .end()
      .end();
    expect(json.text()).toBe(
      compact({
        n: 2,
        negative: -1.5,
        flag: false,
        [odd]: odd,
        "empty object": {},
        "empty array": [],
        list: ["a", { deep: 1, deeper: [[]] }],
      }),
    );
  });

  it("splices indented text at any depth, compacted", () => {
    const inner = { id: "x", files: [{ path: "a/b.md", size: 3 }], none: [] };
    const json = new JsonText()
      .openObject()
      .openObject("source")
      .rendered("manifest", rendered(inner))
      .end()
      .openArray("copies")
      .rendered(undefined, rendered(inner))
      .rendered(undefined, JSON.stringify("scalar"))
      .end()
      .end();
    expect(json.text()).toBe(compact({ source: { manifest: inner }, copies: [inner, "scalar"] }));
  });

  it("renders an empty root and a large document whose pieces are joined in chunks", () => {
    expect(new JsonText().openObject().end().text()).toBe("{}\n");
    const records = Array.from({ length: 5_000 }, (_, index) => ({
      path: `dir/${index}.txt`,
      size: index,
    }));
    const json = new JsonText().openObject().openArray("outputs");
    for (const record of records) {
      json.openObject().member("path", record.path).member("size", record.size).end();
    }
    expect(json.end().end().text()).toBe(compact({ outputs: records }));
  });

  it("encodes the same text as UTF-8 bytes, across chunks and buffer growth", () => {
    const write = (json: JsonText) => {
      json.openObject().openArray("outputs");
      for (let index = 0; index < 6_000; index++) {
        json.openObject().member("path", `dir ü/雪 ${index} 😀.txt`).member("size", index).end();
      }
      return json
        .end()
        .rendered("manifest", rendered({ id: "ü", files: [] }))
        .end();
    };
    const text = write(new JsonText()).text();
    const bytes = write(new JsonText({ encode: true })).bytes();
    expect(bytes.length).toBeGreaterThan(256 * 1024);
    expect(Buffer.from(bytes).equals(Buffer.from(text, "utf8"))).toBe(true);
    const empty = new JsonText({ encode: true }).openObject().end().bytes();
    expect(Buffer.from(empty).toString("utf8")).toBe("{}\n");
    expect(() => new JsonText({ encode: true }).openObject().end().text()).toThrow(/bytes\(\)/);
    expect(() => new JsonText().openObject().end().bytes()).toThrow(/text\(\)/);
    expect(() => new JsonText({ encode: true }).openObject().bytes()).toThrow(/not ended/);
  });

  it("compacts any indented JSON value to what JSON.stringify renders", () => {
    // Keys and strings holding `": "`, quotes, backslashes and escaped line breaks; strings
    // in arrays, which also start a line; nesting; empty containers.
    const tricky = fc.constantFrom('": ', '\\": "', '"', "\\", "\n", '\n  "k": ', "a: b", "");
    const text = fc.oneof(
      fc.string(),
      tricky,
      fc.tuple(tricky, fc.string()).map(([a, b]) => a + b),
    );
    const value = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small" },
        text,
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie("value"), { maxLength: 4 }),
        fc.dictionary(text, tie("value"), { maxKeys: 4 }),
      ),
    })).value;
    fc.assert(
      fc.property(value, (inner) => {
        const json = new JsonText().openObject().rendered("v", rendered(inner)).end();
        expect(json.text()).toBe(compact({ v: inner }));
      }),
      { numRuns: 500 },
    );
  });

  it("refuses members outside a container and text with containers left open", () => {
    expect(() => new JsonText().member("a", 1)).toThrow(/needs an open container/);
    expect(() => new JsonText().end()).toThrow(/nothing to end/);
    expect(() => new JsonText().openObject().text()).toThrow(/container not ended/);
    const member = (value: unknown) => new JsonText().openObject().member("v", value as string);
    expect(() => member({ a: 1 })).toThrow(
      /member "v" must be a string, number or boolean, got object/,
    );
    expect(() => member(() => 1)).toThrow(/got function/);
    expect(() => member(undefined)).toThrow(/got undefined/);
  });
});
