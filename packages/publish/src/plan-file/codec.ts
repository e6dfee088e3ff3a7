// The plan file as text: encoded, saved atomically, and parsed strictly back into a `SavedPlan`.
import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { PublishAction } from "@distributor/engine";
import * as v from "valibot";
import { PlanFileError } from "../errors.js";
import { PLAN_FORMAT_VERSION, type SavedPlan } from "./saved-plan.js";

/** The plan file's JSON text: 2-space indented with a trailing newline. */
export function encodePlan(plan: SavedPlan): string {
  return `${JSON.stringify(plan, null, 2)}\n`;
}

/**
 * Writes a plan file atomically: a temp file beside it, flushed, then renamed over the target,
 * so a reader finds the old file or the complete new one, never a part.
 */
export async function savePlan(path: string, plan: SavedPlan): Promise<void> {
  const text = encodePlan(plan);
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    const handle = await open(temp, "wx", 0o644);
    try {
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw new PlanFileError(
      "plan_unwritable",
      `plan file ${path} cannot be written: ${(error as Error).message}`,
      { cause: error },
    );
  }
  // The rename itself survives a power cut once the directory is flushed.
  const directory = await open(dirname(path), "r").catch(() => undefined);
  await directory
    ?.sync()
    .catch(() => undefined)
    .finally(() => directory.close());
}

const stringList = v.array(v.string());

const outputSchema = v.strictObject({
  path: v.string(),
  kind: v.picklist(["source", "generated"]),
  source_path: v.string(),
  transform: v.nullable(v.string()),
  url: v.nullable(v.string()),
  sha256: v.string(),
  size: v.number(),
});

const writeSchema = v.strictObject({
  path: v.string(),
  kind: v.picklist(["source", "generated"]),
  source_path: v.string(),
  transform: v.nullable(v.string()),
  sha256: v.string(),
  size: v.number(),
  overwrite: v.boolean(),
  if_match: v.nullable(v.string()),
  metadata: v.nullable(v.record(v.string(), v.string())),
});

const ACTIONS = [
  "publish_new",
  "replace_older",
  "force_replace",
  "skip_same",
  "skip_destination_older",
  "skip_destination_newer",
  "fail_conflict",
  "fail_unmanaged",
  "repair",
  "update_metadata",
  "complete",
] as const satisfies readonly PublishAction[];

const entrySchema = v.strictObject({
  pipeline_id: v.string(),
  destination_id: v.string(),
  bundle_path: v.string(),
  config_digest: v.string(),
  config_keys: v.optional(v.record(v.string(), v.string())),
  source: v.strictObject({
    bundle_path: v.string(),
    manifest_id: v.string(),
    manifest_created: v.string(),
    manifest_digest: v.string(),
  }),
  action: v.picklist(ACTIONS),
  reason: v.string(),
  primary_url: v.nullable(v.string()),
  state_version: v.nullable(v.string()),
  outputs: v.array(outputSchema),
  writes: v.array(writeSchema),
  deletes_first: stringList,
  deletes: stringList,
  delete_versions: v.record(v.string(), v.string()),
  clear_bundle_path: v.boolean(),
  keep: stringList,
  journal: v.strictObject({ paths: stringList, directories: stringList, overwrites: stringList }),
  next_state: v.unknown(),
  next_state_sha256: v.nullable(v.string()),
});

const planSchema = v.strictObject({
  format_version: v.literal(PLAN_FORMAT_VERSION),
  planned_at: v.pipe(v.string(), v.isoTimestamp()),
  distributor_version: v.nullable(v.string()),
  config_path: v.string(),
  force: v.boolean(),
  repair: v.boolean(),
  destinations: v.array(entrySchema),
});

/** Parses a plan file's text; `name` (the file) is named in every error. */
export function parsePlan(text: string, name: string): SavedPlan {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new PlanFileError(
      "plan_invalid",
      `plan file ${name} is not JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const format =
    typeof document === "object" && document !== null && !Array.isArray(document)
      ? (document as Record<string, unknown>).format_version
      : undefined;
  if (format === undefined) {
    throw new PlanFileError(
      "plan_invalid",
      `plan file ${name} is not a distributor plan (it has no format_version)`,
    );
  }
  if (format !== PLAN_FORMAT_VERSION) {
    throw new PlanFileError(
      "plan_format_unsupported",
      `plan file ${name} has format_version ${JSON.stringify(format)}; this distributor reads format_version ${PLAN_FORMAT_VERSION} only — make the plan again with this version`,
    );
  }
  const parsed = v.safeParse(planSchema, document);
  if (!parsed.success) {
    const problems = parsed.issues.slice(0, 5).map((issue) => {
      const key = issue.path?.map((item) => String(item.key)).join(".") ?? "";
      return key === "" ? issue.message : `${key}: ${issue.message}`;
    });
    throw new PlanFileError(
      "plan_invalid",
      `plan file ${name} is not a valid plan: ${problems.join("; ")}`,
    );
  }
  const plan = parsed.output as SavedPlan;
  const seen = new Set<string>();
  for (const entry of plan.destinations) {
    const key = JSON.stringify([entry.pipeline_id, entry.destination_id, entry.bundle_path]);
    if (seen.has(key)) {
      throw new PlanFileError(
        "plan_invalid",
        `plan file ${name} plans pipeline ${entry.pipeline_id} destination ${entry.destination_id} bundle ${entry.bundle_path || "."} twice`,
      );
    }
    seen.add(key);
  }
  return plan;
}

/** Reads and parses a plan file. */
export async function loadPlan(path: string): Promise<SavedPlan> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new PlanFileError(
      "plan_unreadable",
      `plan file ${path} cannot be read: ${(error as Error).message}`,
      { cause: error },
    );
  }
  return parsePlan(text, path);
}
