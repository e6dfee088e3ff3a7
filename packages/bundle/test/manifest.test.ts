import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bundleDigest, fileDigest } from "../src/digest.js";
import { BundleValidationError, ManifestError } from "../src/errors.js";
import {
  buildManifest,
  frozenManifestFromJsonSteps,
  isFrozenManifest,
  parseFrozenManifest,
  parseManifest,
  verifiedManifestText,
} from "../src/manifest.js";
import { serializeManifest } from "../src/manifest-text.js";
import type { Manifest } from "../src/manifest-types.js";
import { formatTimestamp } from "../src/timestamp.js";

const REPORT = fileDigest("# Report\nSunny.\n");
const NOTES = fileDigest("notes\n");

interface Doc {
  [key: string]: unknown;
  files: Record<string, unknown>[];
}

/** A valid manifest document with two files, listed out of order. */
function validDoc(): Doc {
  const files = [
    { path: "report.md", sha256: REPORT.sha256, size: REPORT.size },
    { path: "docs/notes.txt", sha256: NOTES.sha256, size: NOTES.size },
  ];
  return {
    schema_version: 1,
    id: "reports.example.2026-06-04",
    created: "2026-06-04T11:55:00Z",
    digest: bundleDigest(files),
    files,
  };
}

/** Recomputes the digest so a test isolates the rule it breaks. */
function redigest(doc: Doc): Doc {
  doc.digest = bundleDigest(doc.files as { path: string; sha256: string; size: number }[]);
  return doc;
}

function rejection(text: string, source?: string): ManifestError {
  try {
    parseManifest(text, source);
  } catch (error) {
    if (error instanceof ManifestError) return error;
    throw error;
  }
  throw new Error("manifest unexpectedly parsed");
}

function rejectDoc(doc: Doc): ManifestError {
  return rejection(JSON.stringify(doc));
}

describe("parseManifest", () => {
  it("parses the documented example and sorts files by path", () => {
    const manifest = parseManifest(JSON.stringify(validDoc()));
    expect(manifest).toEqual({
      schemaVersion: 1,
      id: "reports.example.2026-06-04",
      created: new Date("2026-06-04T11:55:00Z"),
      digest: validDoc().digest,
      files: [
        { path: "docs/notes.txt", sha256: NOTES.sha256, size: 6 },
        { path: "report.md", sha256: REPORT.sha256, size: 16 },
      ],
    });
  });

  it("accepts the single-file bundle of docs/design/bundles.md", () => {
    const text = `{"schema_version": 1, "id": "reports.example.2026-06-04", "created": "2026-06-04T11:55:00Z",
      "digest": "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
      "files": [{"path": "report.md", "sha256": "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6", "size": 16}]}`;
    expect(parseManifest(text).files).toHaveLength(1);
  });

  it("normalises created to UTC", () => {
    const doc = validDoc();
    doc.created = "2026-06-04T13:55:00+02:00";
    expect(parseManifest(JSON.stringify(doc)).created.toISOString()).toBe(
      "2026-06-04T11:55:00.000Z",
    );
  });

  it("prefixes messages with the source and is a BundleValidationError", () => {
    const error = rejection("{", "reports/manifest.json");
    expect(error).toBeInstanceOf(BundleValidationError);
    expect(error.code).toBe("invalid_manifest");
    expect(error.source).toBe("reports/manifest.json");
    expect(error.message).toBe(
      "reports/manifest.json: invalid JSON at line 1 column 2: expected a string key",
    );
    expect(error.issues).toEqual([
      { code: "invalid_manifest", path: "manifest.json", message: error.message },
    ]);
  });

  it("rejects invalid JSON", () => {
    expect(rejection('{"schema_version": 1,').message).toMatch(/^invalid JSON at line 1/);
  });

  it("rejects trailing data", () => {
    expect(rejection(`${JSON.stringify(validDoc())}\n{}`).message).toContain(
      "trailing data after the document",
    );
  });

  it("rejects duplicate keys", () => {
    const text = JSON.stringify(validDoc()).replace('"id":', '"id": "other", "id":');
    expect(rejection(text).message).toContain('duplicate key "id"');
  });

  it("rejects a document that is not an object", () => {
    expect(rejection("[]").message).toBe("manifest must be a JSON object");
  });

  it("rejects unknown top-level fields", () => {
    const doc = { ...validDoc(), destination: "s3://bucket" };
    const error = rejectDoc(doc);
    expect(error.field).toBe("destination");
    expect(error.message).toBe("unknown field destination");
  });

  it("rejects unknown file fields", () => {
    const doc = validDoc();
    doc.files[1] = { ...doc.files[1], mode: "0644" };
    const error = rejectDoc(doc);
    expect(error.field).toBe("files[1].mode");
    expect(error.message).toBe("unknown field files[1].mode");
  });

  it.each(["schema_version", "id", "created", "digest", "files"])(
    "rejects a missing %s",
    (field) => {
      const doc = validDoc();
      delete doc[field];
      const error = rejectDoc(doc);
      expect(error.field).toBe(field);
      expect(error.message).toBe(`${field} is required`);
    },
  );

  it.each(["path", "sha256", "size"])("rejects a file without %s", (field) => {
    const doc = validDoc();
    delete doc.files[0]?.[field];
    expect(rejectDoc(doc).message).toBe(`files[0].${field} is required`);
  });

  it.each([
    [2, "schema_version must be 1, got 2"],
    ["1", 'schema_version must be 1, got "1"'],
    [null, "schema_version must be 1, got null"],
  ])("rejects schema_version %j", (version, message) => {
    const error = rejectDoc({ ...validDoc(), schema_version: version });
    expect(error.field).toBe("schema_version");
    expect(error.message).toBe(message);
  });

  it("rejects schema_version written as 1.0", () => {
    const text = JSON.stringify(validDoc()).replace('"schema_version":1', '"schema_version":1.0');
    expect(rejection(text).message).toBe("schema_version must be 1, got 1.0");
  });

  it.each([
    ["", "id must match"],
    [".hidden", "id must match"],
    ["has space", "id must match"],
    ["a".repeat(129), "id must match"],
  ])("rejects id %j", (id, message) => {
    const error = rejectDoc({ ...validDoc(), id });
    expect(error.field).toBe("id");
    expect(error.message).toContain(message);
  });

  it("accepts an id of 128 characters", () => {
    expect(
      parseManifest(JSON.stringify({ ...validDoc(), id: `A${"b".repeat(127)}` })).id,
    ).toHaveLength(128);
  });

  it("rejects an id that is not a string", () => {
    expect(rejectDoc({ ...validDoc(), id: 7 }).message).toBe("id must be a string, got 7");
  });

  it.each([
    ["2026-06-04T11:55:00", "not in the form"],
    ["2026-02-30T11:55:00Z", "day 30 is out of range for 2026-02"],
    ["2026-06-04", "not in the form"],
    ["June 4, 2026", "not in the form"],
  ])("rejects created %j", (created, detail) => {
    const error = rejectDoc({ ...validDoc(), created });
    expect(error.field).toBe("created");
    expect(error.message).toMatch(/^created must be an RFC 3339 timestamp with an offset/);
    expect(error.message).toContain(detail);
  });

  it.each([
    `sha256:${"A".repeat(64)}`,
    `SHA256:${"a".repeat(64)}`,
    "a".repeat(64),
    `sha256:${"a".repeat(65)}`,
  ])("rejects digest %s", (digest) => {
    const error = rejectDoc({ ...validDoc(), digest });
    expect(error.field).toBe("digest");
    expect(error.message).toMatch(/^digest must be sha256:<64 lowercase hex>, got /);
  });

  it("rejects a digest that does not match the files", () => {
    const doc = validDoc();
    const declared = `sha256:${"0".repeat(64)}`;
    doc.digest = declared;
    const error = rejectDoc(doc);
    expect(error.field).toBe("digest");
    expect(error.message).toBe(
      `digest does not match the files: declared ${declared}, computed ${validDoc().digest}`,
    );
  });

  it("rejects empty files as an empty bundle", () => {
    const error = rejectDoc({ ...validDoc(), files: [] });
    expect(error.field).toBe("files");
    expect(error.message).toBe("files must not be empty");
    expect(error.code).toBe("empty_bundle");
    expect(error.issues).toEqual([
      { code: "empty_bundle", path: "manifest.json", message: "files must not be empty" },
    ]);
  });

  it("rejects files that are not an array of objects", () => {
    expect(rejectDoc({ ...validDoc(), files: {} as never }).message).toBe(
      "files must be an array, got an object",
    );
    const doc = validDoc();
    doc.files[1] = "report.md" as never;
    expect(rejectDoc(doc).message).toBe('files[1] must be an object, got "report.md"');
  });

  it.each([
    ["../escape.md", 'path has a ".." segment'],
    ["/etc/passwd", "path is absolute"],
    ["a//b", "path has an empty segment"],
    ["dir/", "path has a trailing slash"],
    ["a\\b", "path contains a backslash"],
    ["a\u0000b", "path contains a control character"],
    ["./report.md", 'path has a "." segment'],
    ["", "path is empty"],
    ["\ud800.md", "path is not well-formed Unicode"],
    ["manifest.json", "manifest.json at the bundle root is the manifest itself"],
    [".distributor.json", ".distributor.json is reserved for distributor's own files"],
    ["sub/.distributor.json", ".distributor.json is reserved for distributor's own files"],
    ["a/.distributor.lease.json", ".distributor.lease.json is reserved"],
    [".distributor.0123456789abcdef.tmp", ".distributor.0123456789abcdef.tmp is reserved"],
  ])("rejects file path %j", (path, detail) => {
    const doc = validDoc();
    (doc.files[1] as { path: string }).path = path;
    const error = rejectDoc(redigest(doc));
    expect(error.field).toBe("files[1].path");
    expect(error.message).toMatch(/^files\[1\]\.path .* is not allowed: /);
    expect(error.message).toContain(detail);
  });

  it("allows look-alikes of reserved names", () => {
    const doc = validDoc();
    (doc.files[1] as { path: string }).path = "sub/.distributor.yml";
    expect(parseManifest(JSON.stringify(redigest(doc))).files[1]?.path).toBe(
      "sub/.distributor.yml",
    );
  });

  it("rejects duplicate paths", () => {
    const doc = validDoc();
    doc.files.push({ ...doc.files[0] });
    const error = rejectDoc(redigest(doc));
    expect(error.field).toBe("files[2].path");
    expect(error.message).toBe('files[2].path duplicates files[0].path ("report.md")');
  });

  it("rejects a path below a listed file in a manifest listed in byte order, naming the same entries", () => {
    const file = { sha256: NOTES.sha256, size: NOTES.size };
    const sorted = (paths: string[]) =>
      redigest({ ...validDoc(), files: paths.map((path) => ({ path, ...file })) });
    // In byte order a file's own entries may come after others that share its name's start.
    let error = rejectDoc(sorted(["a", "a-x", "a.b", "a/b", "b"]));
    expect(error.field).toBe("files[3].path");
    expect(error.message).toBe('files[3].path "a/b" lies below files[0].path "a", which is a file');
    error = rejectDoc(sorted(["d/e", "d/e.txt", "d/e/f/g", "d/e/f/h"]));
    expect(error.message).toBe(
      'files[2].path "d/e/f/g" lies below files[0].path "d/e", which is a file',
    );
    error = rejectDoc(sorted(["x/y", "x/y", "z"]));
    expect(error.message).toBe('files[1].path duplicates files[0].path ("x/y")');
    expect(
      parseManifest(JSON.stringify(sorted(["a", "a-x", "a.b", "b/c", "b/d/e"]))).files,
    ).toHaveLength(5);
  });

  it("rejects a path below another listed file", () => {
    const doc = validDoc();
    doc.files.push({ path: "report.md/inner.txt", sha256: NOTES.sha256, size: NOTES.size });
    const error = rejectDoc(redigest(doc));
    expect(error.field).toBe("files[2].path");
    expect(error.message).toBe(
      'files[2].path "report.md/inner.txt" lies below files[0].path "report.md", which is a file',
    );
  });

  it.each([`sha256:${"A".repeat(64)}`, "sha256:abc", REPORT.sha256.slice("sha256:".length), 7])(
    "rejects file sha256 %j",
    (sha256) => {
      const doc = validDoc();
      (doc.files[1] as { sha256: unknown }).sha256 = sha256;
      const error = rejectDoc(doc);
      expect(error.field).toBe("files[1].sha256");
      expect(error.message).toMatch(
        typeof sha256 === "string"
          ? /^files\[1\]\.sha256 must be sha256:<64 lowercase hex>, got /
          : /^files\[1\]\.sha256 must be a string, got 7$/,
      );
    },
  );

  it.each([
    ["-1", "-1"],
    ["1.5", "1.5"],
    ["16.0", "16.0"],
    ["1e1", "1e1"],
    ["9007199254740992", "9007199254740992"],
    ['"16"', '"16"'],
    ["null", "null"],
  ])("rejects file size %s", (raw, shown) => {
    const text = JSON.stringify(validDoc()).replace('"size":16', `"size":${raw}`);
    const error = rejection(text);
    expect(error.field).toBe("files[0].size");
    expect(error.message).toBe(
      `files[0].size must be a non-negative integer no larger than 9007199254740991, got ${shown}`,
    );
  });

  it("accepts a zero size", () => {
    const empty = fileDigest("");
    const doc = validDoc();
    doc.files[1] = { path: "empty", ...empty };
    expect(parseManifest(JSON.stringify(redigest(doc))).files[0]).toEqual({
      path: "empty",
      ...empty,
    });
  });
});

describe("parseManifest of canonical text", () => {
  // Canonical text (what `manifest create` writes) is read with JSON.parse; any other text with
  // the strict parser. Texts one edit away from canonical get the strict parser's verdict.
  const canonical = () => serializeManifest(parseManifest(JSON.stringify(validDoc())));

  it("reads canonical text as the strict parser reads it, and whitespace-changed text too", () => {
    const text = canonical();
    const strict = parseManifest(text.replaceAll("\n", "\r\n"));
    expect(parseManifest(text)).toEqual(strict);
    expect(parseFrozenManifest(text)).toEqual(strict);
    expect(verifiedManifestText(parseManifest(text))).toBe(text);
  });

  it("rejects a duplicate key that JSON.parse would take the last of", () => {
    const text = canonical().replace('"size": 6', '"size": 7,\n      "size": 6');
    expect(JSON.parse(text).files[0].size).toBe(6);
    expect(rejection(text).message).toContain('duplicate key "size"');
  });

  it.each(["6.0", "6e0", "-0"])("rejects size %s that JSON.parse reads as a number", (raw) => {
    const text = canonical().replace('"size": 6', `"size": ${raw}`);
    expect(rejection(text).field).toBe("files[0].size");
  });

  it("rejects a byte order mark before canonical text", () => {
    expect(rejection(`\ufeff${canonical()}`).message).toContain("byte order mark");
  });
});

describe("serializeManifest", () => {
  it("writes the canonical form: 2-space indent, trailing newline, UTC, sorted files", () => {
    const doc = validDoc();
    doc.created = "2026-06-04T13:55:00+02:00";
    const text = serializeManifest(parseManifest(JSON.stringify(doc)));
    expect(text).toBe(`{
  "schema_version": 1,
  "id": "reports.example.2026-06-04",
  "created": "2026-06-04T11:55:00Z",
  "digest": "${doc.digest}",
  "files": [
    {
      "path": "docs/notes.txt",
      "sha256": "${NOTES.sha256}",
      "size": 6
    },
    {
      "path": "report.md",
      "sha256": "${REPORT.sha256}",
      "size": 16
    }
  ]
}
`);
  });

  it("keeps milliseconds of created", () => {
    const doc = { ...validDoc(), created: "2026-06-04T11:55:00.25Z" };
    expect(serializeManifest(parseManifest(JSON.stringify(doc)))).toContain(
      '"created": "2026-06-04T11:55:00.250Z"',
    );
  });

  it("writes what JSON.stringify gives the canonical document, for any files in any order", () => {
    const canonical = (manifest: Manifest) =>
      `${JSON.stringify(
        {
          schema_version: manifest.schemaVersion,
          id: manifest.id,
          created: formatTimestamp(manifest.created),
          digest: manifest.digest,
          files: [...manifest.files]
            .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)))
            .map((file) => ({ path: file.path, sha256: file.sha256, size: file.size })),
        },
        null,
        2,
      )}\n`;
    const value = fc.oneof(fc.string(), fc.integer(), fc.constant(undefined), fc.constant(null));
    const file = fc.record({
      path: fc.string(),
      sha256: fc.oneof(fc.string(), value),
      size: value,
    });
    fc.assert(
      fc.property(fc.array(file, { maxLength: 2100, size: "max" }), fc.string(), (files, id) => {
        const manifest = {
          schemaVersion: 1,
          id,
          created: new Date("2026-06-04T11:55:00Z"),
          digest: "sha256:00",
          files,
        } as unknown as Manifest;
        expect(serializeManifest(manifest)).toBe(canonical(manifest));
      }),
      { numRuns: 60 },
    );
  });

  it("round-trips any valid manifest", () => {
    const segment = fc
      .stringMatching(/^[A-Za-z0-9_é][A-Za-z0-9._ é-]{0,11}$/)
      .filter((s) => s !== "." && s !== "..");
    const file = fc.record({
      path: fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("/")),
      content: fc.string(),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(file, { minLength: 1, maxLength: 8, selector: (f) => f.path }),
        fc.date({
          min: new Date("0001-01-01T00:00:00Z"),
          max: new Date("9999-12-31T23:59:59Z"),
          noInvalidDate: true,
        }),
        (files, created) => {
          const paths = new Set(files.map((f) => f.path));
          // A listed file cannot also be a directory of another listed file.
          fc.pre(files.every((f) => ![...paths].some((p) => f.path.startsWith(`${p}/`))));
          fc.pre(!paths.has("manifest.json") && !paths.has(".distributor.json"));
          const manifest = buildManifest({
            id: "prop.test",
            created,
            files: files.map((f) => ({ path: f.path, ...fileDigest(f.content) })),
          });
          const again = parseManifest(serializeManifest(manifest));
          expect(again).toEqual(manifest);
          expect(serializeManifest(again)).toBe(serializeManifest(manifest));
        },
      ),
    );
  });
});

/** `frozenManifestFromJsonSteps` run to its end, with the number of pauses it made. */
function fromJson(value: unknown): { manifest: Manifest; pauses: number } {
  const steps = frozenManifestFromJsonSteps(value);
  let pauses = 0;
  for (;;) {
    const next = steps.next();
    if (next.done) return { manifest: next.value, pauses };
    pauses++;
  }
}

/** The manifest, or the rejection's message and field. */
function verdict(read: () => Manifest): unknown {
  try {
    return { manifest: read() };
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    return { message: error.message, field: error.field, code: error.code };
  }
}

describe("frozenManifestFromJsonSteps", () => {
  it("accepts and rejects what parseFrozenManifest does with the value's JSON text", () => {
    const mutations: ((doc: Doc) => unknown)[] = [
      (doc) => doc,
      (doc) => ({ ...doc, extra: true }),
      (doc) => ({ ...doc, schema_version: 2 }),
      (doc) => ({ ...doc, id: 7 }),
      (doc) => ({ ...doc, created: "yesterday" }),
      (doc) => ({ ...doc, digest: "sha256:00" }),
      (doc) => ({ ...doc, files: [] }),
      (doc) => ({ ...doc, files: "report.md" }),
      (doc) => redigest({ ...doc, files: [...doc.files, doc.files[0] as Record<string, unknown>] }),
      (doc) =>
        redigest({ ...doc, files: [{ ...doc.files[0], size: 1.5 }, doc.files[1]] as Doc["files"] }),
      (doc) =>
        redigest({
          ...doc,
          files: [{ ...doc.files[0], size: 1e21 }, doc.files[1]] as Doc["files"],
        }),
      (doc) =>
        redigest({ ...doc, files: [{ ...doc.files[0], size: -1 }, doc.files[1]] as Doc["files"] }),
      (doc) =>
        redigest({
          ...doc,
          files: [{ ...doc.files[0], path: "a/../b" }, doc.files[1]] as Doc["files"],
        }),
      (doc) =>
        redigest({
          ...doc,
          files: [{ ...doc.files[0], path: "\ud800" }, doc.files[1]] as Doc["files"],
        }),
      (doc) =>
        redigest({
          ...doc,
          files: [{ path: "report.md/x", sha256: REPORT.sha256, size: 1 }, ...doc.files],
        }),
      (doc) =>
        redigest({ ...doc, files: [{ ...doc.files[0], mode: 420 }, doc.files[1]] as Doc["files"] }),
      (doc) => [doc],
      () => null,
    ];
    for (const mutate of mutations) {
      const value = JSON.parse(JSON.stringify(mutate(validDoc()))) as unknown;
      expect(verdict(() => fromJson(value).manifest)).toEqual(
        verdict(() => parseFrozenManifest(JSON.stringify(value))),
      );
    }
  });

  it("returns a frozen manifest in canonical order, pausing every thousand files", () => {
    const files = Array.from({ length: 2500 }, (_, index) => ({
      path: `d/${String(2500 - index).padStart(5, "0")}.txt`,
      ...fileDigest(String(index)),
    }));
    const doc = { ...validDoc(), files };
    redigest(doc);
    const { manifest, pauses } = fromJson(JSON.parse(JSON.stringify(doc)));
    expect(manifest).toEqual(parseFrozenManifest(JSON.stringify(doc)));
    expect(manifest.files[0]?.path).toBe("d/00001.txt");
    expect(Object.isFrozen(manifest) && Object.isFrozen(manifest.files[0])).toBe(true);
    expect(isFrozenManifest(manifest)).toBe(true);
    expect(pauses).toBeGreaterThanOrEqual(5);
    manifest.created.setTime(0);
    expect(isFrozenManifest(manifest)).toBe(false);
    expect(isFrozenManifest(parseManifest(JSON.stringify(doc)))).toBe(false);
  });
});

describe("verifiedManifestText", () => {
  const built = () =>
    buildManifest({
      id: "reports.example",
      created: new Date("2026-06-04T11:55:00Z"),
      files: [
        { path: "report.md", ...fileDigest("# Report\n") },
        { path: "data/a.csv", ...fileDigest("a\n") },
      ],
    });

  it("gives the canonical text of a parsed manifest not changed since", () => {
    const manifest = built();
    // Built from in-memory values: not vouched for (they need not have the parser's types).
    expect(verifiedManifestText(manifest)).toBeUndefined();
    const parsed = parseManifest(serializeManifest(manifest));
    expect(verifiedManifestText(parsed)).toBe(serializeManifest(manifest));
    // Reordering the files in memory changes nothing the text (or validity) depends on.
    parsed.files.reverse();
    expect(verifiedManifestText(parsed)).toBe(serializeManifest(manifest));
  });

  it("gives the canonical text of a frozen parsed manifest, which cannot change but for its date", () => {
    const text = serializeManifest(built());
    const frozen = parseFrozenManifest(text);
    expect(frozen).toEqual(parseManifest(text));
    expect(verifiedManifestText(frozen)).toBe(text);
    expect(Object.isFrozen(frozen) && Object.isFrozen(frozen.files)).toBe(true);
    expect(() => {
      frozen.files[0]!.size = -1;
    }).toThrow(TypeError);
    expect(() => frozen.files.push({ path: "more.txt", ...fileDigest("x") })).toThrow(TypeError);
    // The one change freezing cannot stop: then it is not vouched for any more.
    frozen.created.setTime(Date.parse("2026-06-05T00:00:00Z"));
    expect(verifiedManifestText(frozen)).toBeUndefined();
    expect(() => parseFrozenManifest("{}")).toThrow(ManifestError);
  });

  it("knows nothing of a manifest it did not parse, or of one changed since", () => {
    const parsed = () => parseManifest(serializeManifest(built()));
    const copy: Manifest = { ...parsed() };
    expect(verifiedManifestText(copy)).toBeUndefined();
    const changes: [string, (manifest: Manifest) => void][] = [
      ["id", (m) => (m.id = "other id")],
      ["digest", (m) => (m.digest = `sha256:${"0".repeat(64)}`)],
      ["size", (m) => (m.files[0]!.size = -1)],
      ["size type", (m) => ((m.files[0] as unknown as { size: string }).size = "9")],
      ["path", (m) => (m.files[0]!.path = "../escape")],
      ["created", (m) => m.created.setTime(Date.parse("2026-06-05T00:00:00Z"))],
      ["created invalid", (m) => m.created.setTime(Number.NaN)],
      ["file added", (m) => m.files.push({ path: "more.txt", ...fileDigest("x") })],
    ];
    for (const [name, change] of changes) {
      const manifest = parsed();
      expect(verifiedManifestText(manifest), name).toBeDefined();
      change(manifest);
      expect(verifiedManifestText(manifest), name).toBeUndefined();
    }
  });
});

describe("buildManifest", () => {
  it("refuses values of the wrong type that a pattern or a comparison would let through", () => {
    const file = { path: "report.md", ...fileDigest("# Report\n") };
    const created = new Date("2026-06-04T11:55:00Z");
    const cases: [string, unknown, unknown, RegExp][] = [
      ["numeric id", 2026, [file], /^id must be a string, got 2026$/],
      ["array id", ["abc"], [file], /^id must be a string, got an array$/],
      [
        "boxed path",
        "reports",
        [{ ...file, path: new String("manifest.json") }],
        /^files\[0\]\.path must be a string/,
      ],
      [
        "numeric digest",
        "reports",
        [{ ...file, sha256: 7 }],
        /^files\[0\]\.sha256 must be a string, got 7$/,
      ],
    ];
    for (const [name, id, files, message] of cases) {
      expect(
        () =>
          buildManifest({ id, created, files } as unknown as Parameters<typeof buildManifest>[0]),
        name,
      ).toThrow(message);
    }
  });

  it("computes the digest and sorts files", () => {
    const manifest = buildManifest({
      id: "reports.example.2026-06-04",
      created: new Date("2026-06-04T11:55:00Z"),
      files: [{ path: "report.md", ...REPORT }],
    });
    expect(manifest.digest).toBe(
      "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
    );
  });

  it("applies the parse rules", () => {
    const created = new Date("2026-06-04T11:55:00Z");
    expect(() => buildManifest({ id: "-bad", created, files: [{ path: "a", ...REPORT }] })).toThrow(
      /^id must match/,
    );
    expect(() => buildManifest({ id: "ok", created, files: [] })).toThrow(
      "files must not be empty",
    );
    expect(() =>
      buildManifest({ id: "ok", created: new Date(Number.NaN), files: [{ path: "a", ...REPORT }] }),
    ).toThrow("created must be a valid date");
    expect(() =>
      buildManifest({ id: "ok", created, files: [{ path: "a", sha256: "x", size: 1 }] }),
    ).toThrow("files[0].sha256 must be sha256:<64 lowercase hex>");
    expect(() =>
      buildManifest({ id: "ok", created, files: [{ path: "a", sha256: REPORT.sha256, size: -1 }] }),
    ).toThrow("files[0].size must be a non-negative integer");
  });
});
