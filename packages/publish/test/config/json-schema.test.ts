import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import type * as v from "valibot";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CODE_WRITTEN_ACTIONS, renderConfigSchema } from "../../scripts/config-schema.js";
import { configSchema } from "../../src/config/schema.js";
import { configText, destinationText, problemsOf } from "./helpers.js";

const packageDir = fileURLToPath(new URL("../../", import.meta.url));
const repositoryRoot = resolve(packageDir, "../..");
const schemaFile = join(packageDir, "config-schema.json");
let compiled: ValidateFunction | undefined;

/** Whether the shipped config-schema.json accepts the YAML `text`, with ajv's complaints. */
function schemaVerdict(text: string): { valid: boolean; errors: string } {
  // Read on first use, so that the first test below can create the file when it is missing.
  // Strict about unknown keywords; the conditional rules refine the typed schemas above them, so
  // they name neither types nor properties of their own.
  compiled ??= new Ajv({
    allErrors: true,
    strict: true,
    strictTypes: false,
    strictRequired: false,
  }).compile(JSON.parse(readFileSync(schemaFile, "utf8")));
  const check = compiled;
  const valid = check(parse(text)) === true;
  return { valid, errors: JSON.stringify(check.errors ?? [], null, 1) };
}

function loaderRejects(text: string): string[] {
  return problemsOf(text);
}

describe("config-schema.json", () => {
  it("is generated from the valibot schema (update: pnpm --filter @distributor/publish generate:config-schema)", async () => {
    await expect(renderConfigSchema()).toMatchFileSnapshot(schemaFile);
  });

  it("has a JSON Schema equivalent beside every rule written as code", () => {
    const unpaired: string[] = [];
    walk(configSchema, "config", unpaired);
    expect(unpaired).toEqual([]);
  });

  it("describes every key", () => {
    const generated = JSON.parse(renderConfigSchema()) as JsonNode;
    const undescribed: string[] = [];
    const visit = (node: JsonNode, path: string) => {
      for (const [key, child] of Object.entries(node.properties ?? {})) {
        if (child.description === undefined) undescribed.push(`${path}${key}`);
        visit(child.items ?? child, `${path}${key}.`);
      }
    };
    visit(generated, "");
    for (const [name, definition] of Object.entries(generated.$defs ?? {})) {
      visit(definition, `${name}.`);
    }
    expect(undescribed).toEqual([]);
  });

  it("is shipped by @distributor/publish", () => {
    const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
      files: string[];
      exports: Record<string, unknown>;
    };
    expect(manifest.exports["./config-schema.json"]).toBe("./config-schema.json");
    expect(manifest.files).toContain("config-schema.json");
  });
});

const examplesDir = join(repositoryRoot, "examples");
const examples = readdirSync(examplesDir).filter((name) => name.endsWith(".yml"));

describe("examples against the schema", () => {
  it("has examples", () => {
    expect(examples.length).toBeGreaterThan(0);
  });

  it.each(examples)("examples/%s names the schema on its first line and validates", (name) => {
    const text = readFileSync(join(examplesDir, name), "utf8");
    const first = text.split("\n", 1)[0] ?? "";
    const match = /^# yaml-language-server: \$schema=(\S+)$/.exec(first);
    expect(match, first).not.toBeNull();
    expect(resolve(examplesDir, match?.[1] ?? "")).toBe(schemaFile);
    const verdict = schemaVerdict(text);
    expect(verdict.valid, verdict.errors).toBe(true);
  });

  it("accepts the complete example of docs/config.md", () => {
    const reference = readFileSync(join(repositoryRoot, "docs/config.md"), "utf8");
    const section = reference.split("## A complete example")[1] ?? "";
    const example = /```yaml\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
    expect(example).not.toBe("");
    const verdict = schemaVerdict(example);
    expect(verdict.valid, verdict.errors).toBe(true);
  });
});

const ssh = { backend: "ssh", host: "h", user: "u", path: "/p" };
const s3 = { backend: "s3", bucket: "b" };
const uploadPipeline = (extra: Record<string, unknown> = {}) => ({
  id: "ingest",
  source: { backend: "http_upload" },
  destinations: [{ id: "archive", backend: "local", path: "/in" }],
  ...extra,
});
const stringifyTop = (top: Record<string, unknown>) => JSON.stringify(top);

/** Configurations the loader refuses; the schema must refuse each one too. */
const invalid: ReadonlyArray<readonly [string, string]> = [
  ["no pipelines", "server: {}\n"],
  ["empty pipelines", "pipelines: []\n"],
  ["pipelines not a list", "pipelines: {id: reports}\n"],
  ["unknown top-level key", configText({}, {}, { extra: 1 })],
  ["unknown destination key", configText({ colour: "blue" })],
  ["pipeline without id", configText({}, { id: undefined })],
  ["bad pipeline id", configText({}, { id: "-bad" })],
  ["pipeline without source", configText({}, { source: undefined })],
  ["pipeline without destinations", configText({}, { destinations: [] })],
  ["source without backend", configText({}, { source: { path: "/s" } })],
  ["unknown source backend", configText({}, { source: { backend: "ftp", path: "/s" } })],
  ["local source without path", configText({}, { source: { backend: "local" } })],
  ["destination without id", configText({ id: undefined })],
  ["http_upload destination", destinationText({ backend: "http_upload" })],
  ["ssh destination without host", destinationText({ ...ssh, host: undefined })],
  ["s3 destination without bucket", destinationText({ backend: "s3" })],
  ["s3 key on a local destination", configText({ bucket: "b" })],
  ["path on an s3 destination", destinationText({ ...s3, path: "/x" })],
  [
    "max_upload_size on a local source",
    configText({}, { source: { backend: "local", path: "/s", max_upload_size: "1MiB" } }),
  ],
  [
    "signatures without allowed_signers",
    configText({}, { source: { backend: "local", path: "/s", signatures: { required: true } } }),
  ],
  ["port out of range", destinationText({ ...ssh, port: 70000 })],
  ["port not a whole number", destinationText({ ...ssh, port: 22.5 })],
  [
    "both private key sources",
    destinationText({ ...ssh, private_key_file: "/k", private_key_env: "K" }),
  ],
  ["passphrase without a key", destinationText({ ...ssh, passphrase_env: "P" })],
  ["bad secret name", destinationText({ ...ssh, password_env: "1PASS" })],
  ["literal password", destinationText({ ...ssh, password: "hunter2" })],
  [
    "s3 credentials with one name",
    destinationText({ ...s3, credentials: { access_key_id_env: "A" } }),
  ],
  [
    "s3 literal secret key",
    destinationText({
      ...s3,
      credentials: { access_key_id_env: "A", secret_access_key_env: "S", secret_access_key: "x" },
    }),
  ],
  ["s3 prefix with ..", destinationText({ ...s3, prefix: "a/../b" })],
  ["s3 prefix with a leading /", destinationText({ ...s3, prefix: "/a" })],
  ["s3 endpoint not http", destinationText({ ...s3, endpoint: "ftp://store" })],
  ["s3 endpoint with a user", destinationText({ ...s3, endpoint: "https://u:p@store" })],
  ["links without base_url", configText({ links: { primary: "html" } })],
  ["base_url with a query", configText({ links: { base_url: "https://x.example/?a=1" } })],
  [
    "unknown link primary",
    configText({ links: { base_url: "https://x.example/", primary: "first" } }),
  ],
  ["publish nothing", configText({ publish: { source: false } })],
  ["html without the transform", configText({ publish: { html: true } })],
  [
    "html with the transform disabled",
    configText({ publish: { html: true }, transform: { markdown_to_html: { enabled: false } } }),
  ],
  [
    "unknown transform mode",
    configText({ transform: { markdown_to_html: { enabled: true, mode: "page" } } }),
  ],
  ["unknown reconciliation mode", configText({ reconciliation: { mode: "sync" } })],
  ["on_conflict other than fail", configText({ transfer: { on_conflict: "skip" } })],
  ["prune enabled without a rule", configText({ retention: { prune: { enabled: true } } })],
  [
    "negative keep_latest",
    configText({ retention: { prune: { enabled: true, keep_latest: -1 } } }),
  ],
  ["zero duration", configText({ retention: { prune: { enabled: true, older_than: "0s" } } })],
  ["negative duration", configText({ retention: { prune: { enabled: true, older_than: "-1h" } } })],
  [
    "duration without a unit",
    configText({ retention: { prune: { enabled: true, older_than: "30" } } }),
  ],
  ["size without a unit", configText({}, { validation: { max_total_size: "100" } })],
  ["zero size", configText({}, { validation: { max_total_size: "0MB" } })],
  ["size with an unknown unit", configText({}, { validation: { max_total_size: "1PB" } })],
  ["max_files zero", configText({}, { validation: { max_files: 0 } })],
  ["listen without a port", configText({}, {}, { server: { http: { listen: "localhost" } } })],
  [
    "listen port too large",
    configText({}, {}, { server: { http: { listen: "127.0.0.1:65536" } } }),
  ],
  ["upload source without tokens", stringifyTop({ pipelines: [uploadPipeline()] })],
  [
    "token without token_env",
    stringifyTop({
      upload_tokens: [{ id: "t", allow_pipelines: ["ingest"] }],
      pipelines: [uploadPipeline()],
    }),
  ],
  [
    "literal token",
    stringifyTop({
      upload_tokens: [{ id: "t", token: "x", token_env: "T", allow_pipelines: ["ingest"] }],
      pipelines: [uploadPipeline()],
    }),
  ],
  [
    "token allowing no pipeline",
    stringifyTop({
      upload_tokens: [{ id: "t", token_env: "T", allow_pipelines: [] }],
      pipelines: [uploadPipeline()],
    }),
  ],
  [
    "token listing a pipeline twice",
    stringifyTop({
      upload_tokens: [{ id: "t", token_env: "T", allow_pipelines: ["ingest", "ingest"] }],
      pipelines: [uploadPipeline()],
    }),
  ],
];

/** Rules only the loader checks, because JSON Schema cannot relate one value to another. */
const loaderOnly: ReadonlyArray<readonly [string, string]> = [
  [
    "duplicate pipeline ids",
    stringifyTop({
      pipelines: [
        uploadPipeline({ id: "a", source: { backend: "local", path: "/s" } }),
        uploadPipeline({ id: "a", source: { backend: "local", path: "/s" } }),
      ],
    }),
  ],
  [
    "duplicate destination ids",
    configText(
      {},
      {
        destinations: [
          { id: "a", backend: "local", path: "/a" },
          { id: "a", backend: "local", path: "/b" },
        ],
      },
    ),
  ],
  [
    "token naming an unknown pipeline",
    stringifyTop({
      upload_tokens: [{ id: "t", token_env: "T", allow_pipelines: ["nope"] }],
      pipelines: [uploadPipeline()],
    }),
  ],
  ["fractional bytes", configText({}, { validation: { max_total_size: "1.5B" } })],
];

describe("schema and loader agree", () => {
  it("on a valid configuration of every backend", () => {
    const text = stringifyTop({
      upload_tokens: [{ id: "t", token_env: "T", allow_pipelines: ["ingest"] }],
      pipelines: [
        uploadPipeline({
          source: {
            backend: "http_upload",
            signatures: { required: false, allowed_signers: "/k", namespace: "releases" },
          },
          destinations: [
            { id: "ssh", ...ssh, private_key_file: "/k", passphrase_env: "P", port: 2222 },
            {
              id: "s3",
              ...s3,
              prefix: "reports/daily",
              endpoint: "http://127.0.0.1:9000",
              credentials: { access_key_id_env: "A", secret_access_key_env: "S" },
            },
            {
              id: "site",
              backend: "local",
              path: "/site",
              publish: { source: false, html: true },
              transform: { markdown_to_html: { enabled: true, mode: "index" } },
              links: { base_url: "https://x.example/site/" },
              retention: { prune: { enabled: true, older_than: "1h30m", keep_latest: 0 } },
            },
          ],
        }),
      ],
    });
    expect(() => problemsOf(text)).toThrow(/unexpectedly valid/);
    const verdict = schemaVerdict(text);
    expect(verdict.valid, verdict.errors).toBe(true);
  });

  it.each(invalid)("rejecting %s", (_name, text) => {
    expect(loaderRejects(text).length).toBeGreaterThan(0);
    expect(schemaVerdict(text).valid).toBe(false);
  });

  it.each(loaderOnly)("except on %s, which only the loader rejects", (_name, text) => {
    expect(loaderRejects(text).length).toBeGreaterThan(0);
    expect(schemaVerdict(text).valid).toBe(true);
  });
});

interface JsonNode {
  description?: string;
  properties?: Record<string, JsonNode>;
  items?: JsonNode;
  $defs?: Record<string, JsonNode>;
}

type AnySchema = v.GenericSchema & {
  pipe?: ReadonlyArray<{ kind: string; type: string }>;
  entries?: Record<string, AnySchema>;
  item?: AnySchema;
  wrapped?: AnySchema;
};

/** Collects the pipes that hold a code-written rule without `jsonSchema(...)` metadata. */
function walk(schema: AnySchema, path: string, unpaired: string[]): void {
  if (schema.pipe !== undefined) {
    const written = schema.pipe.filter((item) =>
      (CODE_WRITTEN_ACTIONS as readonly string[]).includes(item.type),
    );
    const paired = schema.pipe.some((item) => item.type === "metadata");
    if (written.length > 0 && !paired) unpaired.push(path);
    for (const item of schema.pipe) {
      if (item.kind === "schema") walk(item as unknown as AnySchema, path, unpaired);
    }
    return;
  }
  if (schema.entries !== undefined) {
    for (const [key, entry] of Object.entries(schema.entries))
      walk(entry, `${path}.${key}`, unpaired);
  }
  if (schema.item !== undefined) walk(schema.item, `${path}[]`, unpaired);
  if (schema.wrapped !== undefined) walk(schema.wrapped, path, unpaired);
}
