import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { defaultProcessAlive } from "@distributor/engine";
import { AcceptedBodySchema, parseWire, RunRecordSchema } from "@distributor/upload-client/wire";
import { UploadStoreError } from "./errors.js";
import type { UploadStore } from "./store.js";
import {
  createUploadStoreCore,
  type PersistedKey,
  type PersistedRun,
  type StoreLimits,
  type StorePersistence,
} from "./store-core.js";

export interface EmbeddedUploadStoreOptions extends StoreLimits {
  /** `server.store.path`: the store's own directory, created private (0700) when missing. */
  path: string;
  /**
   * The service the store belongs to (`server.name`, or one derived from the configuration
   * file): recorded when the store is made, and a store of another service is refused.
   */
  service?: string | undefined;
}

const RUN_FORMAT = "distributor-upload-run/1";
const KEY_FORMAT = "distributor-upload-key/1";
const TEMP_SUFFIX = ".tmp";

/**
 * The embedded durable store (docs/integrations/http-upload.md, durability): one JSON file per run record and per
 * idempotency record below `path`, each written to a temporary file, fsynced, renamed into place,
 * and the directory fsynced, so a record is either wholly there or not, and once a write resolved
 * it survives `kill -9` and a power loss. Everything is also held in memory; the files are read
 * once, at open. See docs/decisions.md for why not SQLite or PGlite.
 */
export async function openEmbeddedUploadStore(
  options: EmbeddedUploadStoreOptions,
): Promise<UploadStore> {
  const runsDirectory = join(options.path, "runs");
  const keysDirectory = join(options.path, "keys");
  await preparePrivateDirectory(options.path);
  const releaseLock = await lockStore(options.path);
  try {
    if (options.service !== undefined) await claimService(options.path, options.service);
  } catch (error) {
    await releaseLock();
    throw error;
  }
  await mkdir(runsDirectory, { recursive: true, mode: 0o700 });
  await mkdir(keysDirectory, { recursive: true, mode: 0o700 });
  const runs = await readRecords(runsDirectory, RUN_FORMAT, parseRun);
  const keys = await readRecords(keysDirectory, KEY_FORMAT, parseKey);
  const known = new Set(runs.map((run) => run.record.run_id));
  const syncRuns = directorySyncer(runsDirectory);
  const syncKeys = directorySyncer(keysDirectory);
  // A key whose run is gone was being written when the process died, or was left by an expiry
  // the process did not finish: no 202 ever named it.
  for (const key of keys) {
    if (!known.has(key.run_id)) {
      await removeFile(keysDirectory, keyFileName(key), syncKeys);
      continue;
    }
    // A replay answers with this body as it is: it must be the wire record.
    const accepted = parseWire(AcceptedBodySchema, key.accepted);
    if (!accepted.ok) {
      throw corrupt(
        join(keysDirectory, keyFileName(key)),
        `is an incomplete ${KEY_FORMAT} record: accepted: ${accepted.problem}`,
      );
    }
    key.accepted = accepted.value;
  }

  const persistence: StorePersistence = {
    durable: true,
    writeRun: (run) =>
      writeRecord(runsDirectory, `${run.record.run_id}.json`, RUN_FORMAT, run, syncRuns),
    removeRun: (runId) => removeFile(runsDirectory, `${runId}.json`, syncRuns),
    writeKey: (key) => writeRecord(keysDirectory, keyFileName(key), KEY_FORMAT, key, syncKeys),
    removeKey: (key) => removeFile(keysDirectory, keyFileName(key), syncKeys),
    close: releaseLock,
  };
  return createUploadStoreCore(options, persistence, {
    runs,
    keys: keys.filter((key) => known.has(key.run_id)),
  });
}

/**
 * One process per store: a second `serve` on the same store (or the same default staging
 * directory) would run every job twice and remove the other's staged uploads at start. The lock
 * file names the holder; a holder that no longer runs on this host is replaced.
 */
async function lockStore(directory: string): Promise<() => Promise<void>> {
  const file = join(directory, "lock");
  const mine = JSON.stringify({ pid: process.pid, host: hostname() });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, "wx", 0o600);
      await handle.writeFile(mine);
      await handle.close();
      return async () => {
        if ((await readFile(file, "utf8").catch(() => "")) === mine) await unlink(file);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    let holder: { pid?: unknown; host?: unknown } = {};
    try {
      holder = JSON.parse(await readFile(file, "utf8"));
    } catch {
      // An empty or torn lock file: its writer died before finishing it.
    }
    if (
      holder.host === hostname() &&
      typeof holder.pid === "number" &&
      (holder.pid === process.pid || defaultProcessAlive(holder.pid))
    ) {
      throw new UploadStoreError(
        "store_in_use",
        `upload store ${directory} is in use by process ${holder.pid} on this host; one serve per store: stop that process, or give this configuration a store of its own (server.store.path)`,
      );
    }
    if (holder.host !== undefined && holder.host !== hostname()) {
      throw new UploadStoreError(
        "store_in_use",
        `upload store ${directory} is locked by host ${String(holder.host)} (pid ${String(holder.pid)}); if that host no longer runs serve, remove ${file}`,
      );
    }
    await unlink(file).catch(() => undefined);
  }
  throw new UploadStoreError("store_in_use", `upload store ${directory}: cannot take ${file}`);
}

const SERVICE_FORMAT = "distributor-upload-service/1";

/**
 * Records `service` as the store's owner when the store has none yet (written whole, then moved
 * into place), and refuses a store recorded for another service: its runs were accepted under
 * another configuration, and its idempotency keys answered that service's producers.
 */
async function claimService(directory: string, service: string): Promise<void> {
  const file = join(directory, "service.json");
  let text: string | undefined;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  if (text === undefined) {
    const temp = `${file}.${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`;
    const handle = await open(temp, "wx", 0o600);
    try {
      await handle.writeFile(`${JSON.stringify({ format: SERVICE_FORMAT, service })}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
    await syncDirectory(directory);
    return;
  }
  let recorded: unknown;
  try {
    recorded = (JSON.parse(text) as { service?: unknown }).service;
  } catch {
    recorded = undefined;
  }
  if (typeof recorded !== "string") {
    throw corrupt(file, `is not a ${SERVICE_FORMAT} record`);
  }
  if (recorded !== service) {
    throw new UploadStoreError(
      "store_in_use",
      `upload store ${directory} belongs to service ${JSON.stringify(recorded)}, not ${JSON.stringify(service)} (this configuration's server.name, or its file); give this configuration a store of its own (server.store.path), or set server.name: ${JSON.stringify(recorded)} if it is the same service`,
    );
  }
}

/** Key files are named by a digest of their scope: keys may hold any visible ASCII. */
function keyFileName(key: Pick<PersistedKey, "token_id" | "pipeline_id" | "key">): string {
  const scope = JSON.stringify([key.token_id, key.pipeline_id, key.key]);
  return `${createHash("sha256").update(scope).digest("hex")}.json`;
}

async function writeRecord(
  directory: string,
  name: string,
  format: string,
  record: object,
  syncDirectory: () => Promise<void>,
): Promise<void> {
  const temp = join(directory, `.${name}.${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`);
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(`${JSON.stringify({ format, ...record })}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, join(directory, name));
  await syncDirectory();
}

async function removeFile(
  directory: string,
  name: string,
  syncDirectory: () => Promise<void>,
): Promise<void> {
  try {
    await unlink(join(directory, name));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  await syncDirectory();
}

/**
 * Flushes of one directory shared by concurrent writers (group commit): a caller's rename or
 * unlink is done before it asks, so a flush that starts after the ask covers it. While a flush
 * runs, every new ask waits for the one next flush, which starts when the running one ends; so
 * n concurrent record writes cost about two directory flushes, not n.
 */
function directorySyncer(directory: string): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = (): Promise<void> => {
    const flush = syncDirectory(directory).finally(() => {
      if (running === flush) running = undefined;
    });
    running = flush;
    return flush;
  };
  return () => {
    if (running === undefined) return start();
    next ??= running
      .catch(() => undefined)
      .then(() => {
        next = undefined;
        return start();
      });
    return next;
  };
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Every record file of `directory`; temporary files of interrupted writes are removed. */
async function readRecords<T>(
  directory: string,
  format: string,
  parse: (value: Record<string, unknown>) => T | string,
): Promise<T[]> {
  const records: T[] = [];
  for (const name of (await readdir(directory)).sort()) {
    if (name.endsWith(TEMP_SUFFIX)) {
      await unlink(join(directory, name)).catch(() => undefined);
      continue;
    }
    if (!name.endsWith(".json")) continue;
    const file = join(directory, name);
    let value: unknown;
    try {
      value = JSON.parse(await readFile(file, "utf8"));
    } catch (error) {
      throw corrupt(file, `is not JSON: ${(error as Error).message}`);
    }
    const body = value as Record<string, unknown> | null;
    if (typeof body !== "object" || body === null || body.format !== format) {
      throw corrupt(file, `is not a ${format} record`);
    }
    const record = parse(body);
    if (typeof record === "string") {
      throw corrupt(file, `is an incomplete ${format} record: ${record}`);
    }
    records.push(record);
  }
  return records;
}

/** A run record file, its record checked against the wire record it is served as. */
function parseRun(body: Record<string, unknown>): PersistedRun | string {
  if (typeof body.seq !== "number") return "seq must be a number";
  if (typeof body.token_id !== "string") return "token_id must be a string";
  const record = parseWire(RunRecordSchema, body.record);
  if (!record.ok) return `record: ${record.problem}`;
  return {
    seq: body.seq,
    token_id: body.token_id,
    record: record.value,
    job: (body.job as PersistedRun["job"] | undefined) ?? null,
  };
}

/** An idempotency record file; its accepted body is checked once its run is known to exist. */
function parseKey(body: Record<string, unknown>): PersistedKey | string {
  const { token_id, pipeline_id, key, run_id, accepted } = body;
  for (const [name, value] of Object.entries({ token_id, pipeline_id, key, run_id })) {
    if (typeof value !== "string") return `${name} must be a string`;
  }
  if (typeof accepted !== "object" || accepted === null) return "accepted must be an object";
  return {
    token_id: token_id as string,
    pipeline_id: pipeline_id as string,
    key: key as string,
    run_id: run_id as string,
    accepted: accepted as PersistedKey["accepted"],
  };
}

function corrupt(file: string, problem: string): UploadStoreError {
  return new UploadStoreError(
    "store_unreadable",
    `upload store record ${file} ${problem}; restore the store from a backup or move the file away`,
  );
}

/**
 * Creates `directory`, or accepts an existing one only when it is a real directory owned by this
 * user that no one else may write; otherwise fails with `code`, naming the configuration `key`.
 */
export async function preparePrivateDirectory(
  directory: string,
  failure: { code: string; key: string } = { code: "store_unsafe", key: "server.store.path" },
): Promise<void> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const stats = await lstat(directory);
  const problem = stats.isSymbolicLink()
    ? "is a symlink"
    : !stats.isDirectory()
      ? "is not a directory"
      : process.geteuid !== undefined && stats.uid !== process.geteuid()
        ? `belongs to uid ${stats.uid}, not to this user (uid ${process.geteuid()})`
        : (stats.mode & 0o022) !== 0
          ? `may be written by other users (mode ${(stats.mode & 0o777).toString(8)})`
          : undefined;
  if (problem !== undefined) {
    throw new UploadStoreError(
      failure.code,
      `${failure.key} ${directory} ${problem}; use a private directory (mode 0700, owned by this user)`,
    );
  }
}
