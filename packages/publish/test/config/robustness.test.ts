import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ConfigError, parseConfig } from "../../src/config/index.js";

const KEYS = [
  "id",
  "backend",
  "path",
  "host",
  "port",
  "bucket",
  "prefix",
  "credentials",
  "publish",
  "transform",
  "links",
  "state",
  "retention",
  "transfer",
  "source",
  "destinations",
  "allow_pipelines",
  "token_env",
  "unknown",
];

function validDocument(): Record<string, unknown> {
  return {
    upload_tokens: [{ id: "reporter", token_env: "TOKEN", allow_pipelines: ["ingest"] }],
    pipelines: [
      {
        id: "ingest",
        source: { backend: "http_upload" },
        destinations: [
          { id: "archive", backend: "local", path: "/archive" },
          {
            id: "bucket",
            backend: "s3",
            bucket: "reports",
            retention: { prune: { enabled: true, keep_latest: 1 } },
          },
        ],
      },
    ],
  };
}

/** Every mapping of the document, so that a value can be planted in any of them. */
function mappings(
  value: unknown,
  found: Record<string, unknown>[] = [],
): Record<string, unknown>[] {
  if (Array.isArray(value)) for (const item of value) mappings(item, found);
  else if (typeof value === "object" && value !== null) {
    const mapping = value as Record<string, unknown>;
    found.push(mapping);
    for (const child of Object.values(mapping)) mappings(child, found);
  }
  return found;
}

describe("parseConfig on damaged documents", () => {
  it("reports problems as a ConfigError and never fails inside", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(), fc.constantFrom(...KEYS), fc.jsonValue({ maxDepth: 3 })), {
          minLength: 1,
          maxLength: 4,
        }),
        (plants) => {
          const document = validDocument();
          for (const [index, key, value] of plants) {
            const targets = mappings(document);
            const target = targets[index % targets.length];
            if (target !== undefined) target[key] = value;
          }
          try {
            parseConfig(stringify(document));
          } catch (error) {
            expect(error).toBeInstanceOf(ConfigError);
            const issues = (error as ConfigError).issues;
            expect(issues.length).toBeGreaterThan(0);
            expect(new Set(issues).size).toBe(issues.length);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
