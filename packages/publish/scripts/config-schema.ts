import { type JsonSchema, toJsonSchema } from "@valibot/to-json-schema";
import { CONFIG_DEFAULTS } from "../src/config/defaults.js";
import {
  configSchema,
  DESTINATION_BACKENDS,
  destinationSchema,
  pipelineSchema,
  SOURCE_BACKENDS,
  sourceSchema,
  uploadTokenSchema,
} from "../src/config/schema.js";
import { BACKEND_KEYS, REQUIRED_KEYS } from "../src/config/validate.js";
import { CONFIG_DESCRIPTIONS } from "./config-descriptions.js";

/**
 * Builds config-schema.json, the JSON Schema editors use to complete and check distributor
 * configuration files. The shape (keys, types, choices, patterns) is converted from the valibot
 * schema the loader uses; the rules the loader checks in validate.ts (required keys, keys valid
 * for one backend only, keys that need each other) are added here by hand, from the same tables.
 * Rules JSON Schema cannot state stay with the loader alone: unique ids, and upload tokens naming
 * pipelines that exist and have an http_upload source.
 */
export function buildConfigSchema(): JsonSchema {
  const generated = toJsonSchema(configSchema, {
    // Every pipe the converter meets starts with the schema of the value as written in YAML (a
    // mapping guard, then the mapping; a string, then the transform to milliseconds or bytes);
    // "output" mode converts from the last schema of each pipe, the one that describes the keys.
    typeMode: "output",
    errorMode: "throw",
    // Code-written rules: each carries its JSON Schema keywords beside it (see schema.ts), and a
    // test checks that none lacks them.
    ignoreActions: [...CODE_WRITTEN_ACTIONS],
    definitions: {
      pipeline: pipelineSchema,
      source: sourceSchema,
      destination: destinationSchema,
      upload_token: uploadTokenSchema,
    },
  });
  const defs = generated.$defs as Record<string, JsonSchema>;
  const source = defs.source as JsonSchema;
  const destination = defs.destination as JsonSchema;
  const pipeline = defs.pipeline as JsonSchema;
  const token = defs.upload_token as JsonSchema;
  const root = generated;

  root.title = "distributor configuration";
  root.description =
    "distributor.yml: pipelines, their sources and destinations, and the upload server. See docs/config.md.";

  withRequired(pipeline, ["id", "source", "destinations"]);
  minItems(pipeline, "destinations");
  withRequired(source, ["backend"]);
  withRequired(propertyOf(source, "signatures"), ["allowed_signers"]);
  withRequired(destination, ["id", "backend"]);
  source.allOf = backendRules(SOURCE_BACKENDS);
  destination.allOf = [
    ...backendRules(DESTINATION_BACKENDS),
    ...publishRules(),
    when({ required: ["links"] }, { properties: { links: { required: ["base_url"] } } }),
    // Metadata rules need a backend that stores object metadata (validate.ts).
    when(
      { required: ["backend"], not: valueAt(["backend"], "s3") },
      { properties: { metadata: { maxItems: 0 } } },
    ),
    when(valueAt(["retention", "prune", "enabled"], true), {
      properties: {
        retention: {
          properties: {
            prune: { anyOf: [{ required: ["older_than"] }, { required: ["keep_latest"] }] },
          },
        },
      },
    }),
  ];
  withRequired(propertyOf(destination, "metadata").items as JsonSchema, ["match"]);
  withRequired(token, ["id", "token_env", "allow_pipelines"]);
  minItems(token, "allow_pipelines");
  propertyOf(token, "allow_pipelines").uniqueItems = true;

  withRequired(root, ["pipelines"]);
  minItems(root, "pipelines");
  root.allOf = [
    // An http_upload source needs at least one upload token.
    when(
      { properties: { pipelines: { contains: valueAt(["source", "backend"], "http_upload") } } },
      { required: ["upload_tokens"], properties: { upload_tokens: { minItems: 1 } } },
    ),
  ];
  dropRefusedKeys(root);
  describeKeys(root, defs);
  return root;
}

/**
 * Keys that exist only to be refused with a pointer (a literal `password:`, `token:`, ...) are
 * left out of `properties`: `additionalProperties: false` still refuses them, and editors do not
 * offer them for completion.
 */
function dropRefusedKeys(schema: unknown): void {
  if (typeof schema !== "object" || schema === null) return;
  const node = schema as Record<string, unknown>;
  const properties = node.properties as Record<string, JsonSchema> | undefined;
  if (properties !== undefined) {
    for (const [key, value] of Object.entries(properties)) {
      if (JSON.stringify(value) === '{"not":{}}') delete properties[key];
    }
  }
  for (const value of Object.values(node)) dropRefusedKeys(value);
}

/** Adds CONFIG_DESCRIPTIONS; a path that names no key fails the generation. */
function describeKeys(root: JsonSchema, defs: Record<string, JsonSchema>): void {
  for (const [path, description] of Object.entries(CONFIG_DESCRIPTIONS)) {
    const [first = "", ...rest] = path.split(".");
    const definition = rest.length > 0 ? defs[first] : undefined;
    let node = definition ?? root;
    for (const segment of definition === undefined ? [first, ...rest] : rest) {
      // A list's keys are those of its items (`metadata.match`).
      const items = node.items as JsonSchema | undefined;
      node = propertyOf(items ?? node, segment);
    }
    node.description = description;
  }
}

/** Action types the converter cannot translate; schema.ts pairs each with `jsonSchema(...)`. */
export const CODE_WRITTEN_ACTIONS = ["raw_check", "check", "raw_transform"] as const;

/** Per backend: the keys it requires, and every other backend's keys refused (validate.ts). */
function backendRules(backends: readonly (typeof SOURCE_BACKENDS)[number][]): JsonSchema[] {
  const rules = backends.map((backend) => {
    const refused = Object.entries(BACKEND_KEYS)
      .filter(([, owners]) => !owners.includes(backend))
      .map(([key]) => key);
    const consequence: JsonSchema = {
      properties: Object.fromEntries(refused.map((key) => [key, false])),
    };
    const required = REQUIRED_KEYS[backend];
    if (required.length > 0) consequence.required = [...required];
    return when(valueAt(["backend"], backend), consequence);
  });
  if (backends.includes("ssh")) {
    rules.push(
      when(valueAt(["backend"], "ssh"), {
        not: { required: ["private_key_file", "private_key_env"] },
        dependencies: {
          passphrase_env: {
            anyOf: [{ required: ["private_key_file"] }, { required: ["private_key_env"] }],
          },
        },
      }),
    );
  }
  if (backends.includes("s3")) {
    rules.push(
      when(valueAt(["backend"], "s3"), {
        properties: { credentials: { required: ["access_key_id_env", "secret_access_key_env"] } },
      }),
    );
  }
  return rules;
}

/** `publish` must enable something; `publish.html` needs the Markdown transform (with defaults). */
function publishRules(): JsonSchema[] {
  const isSet = (path: readonly string[], value: boolean, fallback: boolean): JsonSchema =>
    value === fallback ? { not: valueAt(path, !value) } : valueAt(path, value);
  const sourceOff = isSet(["publish", "source"], false, CONFIG_DEFAULTS.publishSource);
  const htmlOn = isSet(["publish", "html"], true, CONFIG_DEFAULTS.publishHtml);
  const transformOn = isSet(
    ["transform", "markdown_to_html", "enabled"],
    true,
    CONFIG_DEFAULTS.transformEnabled,
  );
  return [{ not: { allOf: [sourceOff, { not: htmlOn }] } }, when(htmlOn, transformOn)];
}

/** Matches a mapping whose value at `path` (keys below each other) is present and equals `value`. */
function valueAt(path: readonly string[], value: string | boolean): JsonSchema {
  const [key, ...rest] = path;
  if (key === undefined) return { const: value };
  return { properties: { [key]: valueAt(rest, value) }, required: [key] };
}

/** JSON Schema's if/then. */
function when(condition: JsonSchema, consequence: JsonSchema): JsonSchema {
  // biome-ignore lint/suspicious/noThenProperty: `then` is a JSON Schema keyword here.
  return { if: condition, then: consequence };
}

function withRequired(schema: JsonSchema, keys: readonly string[]): void {
  schema.required = [...keys];
}

function minItems(schema: JsonSchema, key: string): void {
  propertyOf(schema, key).minItems = 1;
}

function propertyOf(schema: JsonSchema, key: string): JsonSchema {
  const property = (schema.properties as Record<string, JsonSchema> | undefined)?.[key];
  if (property === undefined) throw new Error(`the generated schema has no property ${key}`);
  return property;
}

/** The file as it is checked in: two-space JSON with a final newline. */
export function renderConfigSchema(): string {
  return `${JSON.stringify(buildConfigSchema(), null, 2)}\n`;
}
