import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readdir, readFile, rename, rm, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { defaultProcessAlive } from "@distributor/engine";
import type { StoreLimits, UploadStore } from "@distributor/upload-store";
import { UploadStoreError } from "@distributor/upload-store";
import { AcceptedBodySchema, parseWire, RunRecordSchema } from "@distributor/upload-store/wire";
import { openRecordLog, readRecordLog, syncDirectory } from "./record-log.js";
import {
  createUploadStoreCore,
  type PersistedKey,
  type PersistedRun,
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
  /**
   * The configuration file of the `serve` opening it: recorded in the store's lock, so that a
   * second process refused the store is told which file the holder serves.
   */
  configFile?: string | undefined;
}

const RUN_FORMAT = "distributor-upload-run/1";
const KEY_FORMAT = "distributor-upload-key/1";
const LOG_FORMAT = "distributor-upload-log/1";
const LOG_FILE = "records.log";
const TEMP_SUFFIX = ".tmp";

/**
 * The embedded durable store (docs/design/upload-service.md, the embedded store): every change of
 * a run record or an idempotency record is one line appended to `records.log`, and the changes of
 * one moment share one flush (group commit), so a change is either wholly there or not, and once
 * its write resolved it survives `kill -9` and a power loss. Everything is also held in memory; the
 * log is read once, at open, and written afresh then and whenever it has grown to several times
 * what it holds. A store of the earlier layout (one file per record below `runs/` and `keys/`) is
 * taken into the log at open. See docs/decisions.md for why not SQLite or PGlite.
 */
export async function openEmbeddedUploadStore(
  options: EmbeddedUploadStoreOptions,
): Promise<UploadStore> {
  await preparePrivateDirectory(options.path);
  const releaseLock = await lockStore(options.path, options.configFile);
  try {
    if (options.service !== undefined) await claimService(options.path, options.service);
    return await openLoggedStore(options, releaseLock);
  } catch (error) {
    await releaseLock();
    throw error;
  }
}

async function openLoggedStore(
  options: EmbeddedUploadStoreOptions,
  releaseLock: () => Promise<void>,
): Promise<UploadStore> {
  const file = join(options.path, LOG_FILE);
  const runs = new Map<string, PersistedRun>();
  const keys = new Map<string, PersistedKey>();
  const earlier = await readEarlierLayout(options.path);
  for (const run of earlier.runs) runs.set(run.record.run_id, run);
  for (const key of earlier.keys) keys.set(keyId(key), key);
  // The log is newer than any file of the earlier layout: those are only left when a start that
  // took them into the log died before it removed them.
  for (const [index, entry] of (await readRecordLog(file, LOG_FORMAT)).entries()) {
    const problem = replay(entry, runs, keys);
    if (problem !== undefined) {
      // Entries are the lines after the format line (a bad line before a whole one is refused
      // while reading), so entry i is line i + 2.
      throw corrupt(`${file} line ${index + 2}`, `is not a whole change: ${problem}`);
    }
  }
  for (const [id, key] of keys) {
    // A key whose run is gone was bound while the run's write failed, or outlived an expiry.
    if (!runs.has(key.run_id)) {
      keys.delete(id);
      continue;
    }
    // A replay answers with this body as it is: it must be the wire record.
    const accepted = parseWire(AcceptedBodySchema, key.accepted);
    if (!accepted.ok) {
      throw corrupt(`${file} key ${JSON.stringify(key.key)}`, `accepted: ${accepted.problem}`);
    }
    key.accepted = accepted.value;
  }
  const log = await openRecordLog({
    file,
    format: LOG_FORMAT,
    *snapshot() {
      for (const run of [...runs.values()].sort((a, b) => a.seq - b.seq)) yield { run };
      for (const key of keys.values()) yield { key };
    },
  });
  await earlier.remove();

  const persistence: StorePersistence = {
    durable: true,
    ordered: true,
    writeRun: (run) => log.append({ run }, () => runs.set(run.record.run_id, run)),
    removeRun: (runId) => log.append({ remove_run: runId }, () => runs.delete(runId)),
    writeKey: (key) => log.append({ key }, () => keys.set(keyId(key), key)),
    removeKey: (key) => {
      const id = keyId(key);
      return log.append({ remove_key: JSON.parse(id) }, () => keys.delete(id));
    },
    close: async () => {
      await log.close();
      await releaseLock();
    },
  };
  return createUploadStoreCore(options, persistence, {
    runs: [...runs.values()],
    keys: [...keys.values()],
  });
}

/** Applies one log entry; a string names what is wrong with it. */
function replay(
  entry: Record<string, unknown>,
  runs: Map<string, PersistedRun>,
  keys: Map<string, PersistedKey>,
): string | undefined {
  if ("run" in entry) {
    const run = parseRun(objectOf(entry.run));
    if (typeof run === "string") return `run: ${run}`;
    runs.set(run.record.run_id, run);
    return undefined;
  }
  if ("key" in entry) {
    const key = parseKey(objectOf(entry.key));
    if (typeof key === "string") return `key: ${key}`;
    keys.set(keyId(key), key);
    return undefined;
  }
  if ("remove_run" in entry) {
    if (typeof entry.remove_run !== "string") return "remove_run must be a string";
    runs.delete(entry.remove_run);
    return undefined;
  }
  if ("remove_key" in entry) {
    const scope = entry.remove_key;
    if (
      !Array.isArray(scope) ||
      scope.length !== 3 ||
      scope.some((part) => typeof part !== "string")
    ) {
      return "remove_key must be [token_id, pipeline_id, key]";
    }
    keys.delete(JSON.stringify(scope));
    return undefined;
  }
  return "it names no run, key, remove_run or remove_key";
}

const objectOf = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};

/** An idempotency record's identity: its scope. */
const keyId = (key: Pick<PersistedKey, "token_id" | "pipeline_id" | "key">): string =>
  JSON.stringify([key.token_id, key.pipeline_id, key.key]);

/**
 * The records of a store written before the log (one file per record below `runs/` and
 * `keys/`), and how to remove them once the log holds them.
 */
async function readEarlierLayout(path: string): Promise<{
  runs: PersistedRun[];
  keys: PersistedKey[];
  remove: () => Promise<void>;
}> {
  const runsDirectory = join(path, "runs");
  const keysDirectory = join(path, "keys");
  const runs = await readRecords(runsDirectory, RUN_FORMAT, parseRun);
  const keys = await readRecords(keysDirectory, KEY_FORMAT, parseKey);
  const present = runs !== undefined || keys !== undefined;
  return {
    runs: runs ?? [],
    keys: keys ?? [],
    async remove() {
      if (!present) return;
      await rm(runsDirectory, { recursive: true, force: true });
      await rm(keysDirectory, { recursive: true, force: true });
      await syncDirectory(path);
    },
  };
}

/**
 * One process per store: a second `serve` on the same store (or the same default staging
 * directory) would run every job twice and remove the other's staged uploads at start. The lock
 * file names the holder and the configuration file it serves; a holder that no longer runs on
 * this host is replaced.
 */
async function lockStore(
  directory: string,
  configFile: string | undefined,
): Promise<() => Promise<void>> {
  const file = join(directory, "lock");
  const mine = JSON.stringify({
    pid: process.pid,
    host: hostname(),
    ...(configFile === undefined ? {} : { config: configFile }),
  });
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
    let holder: { pid?: unknown; host?: unknown; config?: unknown } = {};
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
        `upload store ${directory} is in use by process ${holder.pid} on this host${clash(holder.config, configFile)}; one serve per store: stop that process, or give this configuration a store of its own (server.store.path)`,
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

/** What the lock's holder serves, against what this process would: the clash, in words. */
function clash(held: unknown, configFile: string | undefined): string {
  if (typeof held !== "string") return "";
  if (configFile === undefined || held === configFile) return `, serving ${held}`;
  return `, serving ${held} (this process serves ${configFile})`;
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

/**
 * Every record file of `directory` (undefined when there is no such directory); temporary files
 * of interrupted writes are skipped.
 */
async function readRecords<T>(
  directory: string,
  format: string,
  parse: (value: Record<string, unknown>) => T | string,
): Promise<T[] | undefined> {
  let names: string[];
  try {
    names = (await readdir(directory)).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const records: T[] = [];
  for (const name of names) {
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
  const { token_id, pipeline_id, key, run_id, accepted, config_digest } = body;
  for (const [name, value] of Object.entries({ token_id, pipeline_id, key, run_id })) {
    if (typeof value !== "string") return `${name} must be a string`;
  }
  if (typeof accepted !== "object" || accepted === null) return "accepted must be an object";
  // Absent in keys an earlier version bound.
  if (config_digest !== undefined && typeof config_digest !== "string") {
    return "config_digest must be a string";
  }
  return {
    token_id: token_id as string,
    pipeline_id: pipeline_id as string,
    key: key as string,
    run_id: run_id as string,
    accepted: accepted as PersistedKey["accepted"],
    ...(config_digest === undefined ? {} : { config_digest }),
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
