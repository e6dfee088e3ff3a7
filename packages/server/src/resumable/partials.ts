import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import type { AcceptedUpload, IdempotencyScope } from "@distributor/upload-store";
import { sharedFlush } from "../staging/staging.js";

// A partial upload lives in the staging root, so an instance that shares the staging directory
// can continue it: `partial-<id>/info.json` (what was declared at creation), `data` (the bytes
// received, in order) and, once accepted, `accepted.json`. Nothing about it is kept in memory.
// docs/design/upload-service.md, "Resumable uploads".

export const PARTIAL_DIRECTORY_PREFIX = "partial-";
const INFO = "info.json";
const DATA = "data";
const ACCEPTED = "accepted.json";
const LOCK = "lock";

/** What a creation declared; fixed for the partial's life. */
export interface PartialInfo {
  id: string;
  tokenId: string;
  pipelineId: string;
  key: string | null;
  /** `Upload-Length`: the archive's size. */
  length: number;
  /** The archive's Content-Type (gzip or tar). */
  contentType: string;
  /** The archive's SHA-256 (base64) when the producer declared it; checked once all arrived. */
  sha256: string | null;
  /** Epoch ms. */
  createdAt: number;
}

/** A partial as the staging directory holds it now. */
export interface Partial {
  info: PartialInfo;
  directory: string;
  /** Bytes held on disk, flushed before this was read: the offset the server may report. */
  offset: number;
  /** When it expires (epoch ms): `partial_ttl` after its last bytes arrived. */
  expiresAt: number;
  /** The accepted upload, once the completed partial was accepted. */
  accepted: AcceptedUpload | undefined;
  /** Its bytes were removed by expiry (a resume must start over). */
  expired: boolean;
}

/**
 * The partial's id: derived from the idempotency key's scope, so a producer that restarted finds
 * its partial again with the same key on any instance; random without a key.
 */
export function partialId(scope: IdempotencyScope | undefined): string {
  if (scope === undefined) return randomBytes(24).toString("base64url");
  return createHash("sha256")
    .update(JSON.stringify(["partial", scope.tokenId, scope.pipelineId, scope.key]))
    .digest("base64url")
    .slice(0, 32);
}

const ID = /^[A-Za-z0-9_-]{16,64}$/;

/** The partial's directory, or undefined for an id no partial can have. */
export function partialDirectory(root: string, id: string): string | undefined {
  return ID.test(id) ? join(root, `${PARTIAL_DIRECTORY_PREFIX}${id}`) : undefined;
}

/**
 * Creates the partial's directory, its declaration and an empty data file, all flushed; false
 * when a partial with this id exists already (the caller reads it).
 */
export async function createPartial(root: string, info: PartialInfo): Promise<boolean> {
  const directory = partialDirectory(root, info.id) as string;
  try {
    await mkdir(directory, { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  const data = await open(join(directory, DATA), "wx", 0o600);
  try {
    await data.sync();
  } finally {
    await data.close();
  }
  await writeDurably(directory, INFO, `${JSON.stringify(info)}\n`);
  await sharedFlush(root);
  return true;
}

/** The partial `id` as it is on disk, or undefined when there is none (or it is half created). */
export async function readPartial(
  root: string,
  id: string,
  ttlMs: number,
): Promise<Partial | undefined> {
  const directory = partialDirectory(root, id);
  if (directory === undefined) return undefined;
  const info = await readJson<PartialInfo>(join(directory, INFO));
  if (info === undefined) return undefined;
  const accepted = await readJson<AcceptedUpload>(join(directory, ACCEPTED));
  const held = await durableSize(join(directory, DATA));
  const lastWrite = held?.mtimeMs ?? info.createdAt;
  return {
    info,
    directory,
    offset: accepted !== undefined ? info.length : (held?.size ?? 0),
    expiresAt: Math.max(info.createdAt, lastWrite) + ttlMs,
    accepted,
    expired: held === undefined && accepted === undefined,
  };
}

/** Flushes the data file, then reads its size: what a crash or power loss cannot take back. */
async function durableSize(path: string): Promise<{ size: number; mtimeMs: number } | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    await handle.sync();
    const { size, mtimeMs } = await handle.stat();
    return { size, mtimeMs };
  } finally {
    await handle.close();
  }
}

/** The data file, open for writing at explicit positions. */
export function openData(partial: Partial) {
  return open(join(partial.directory, DATA), "r+");
}

/** The data file's path, to read the completed archive. */
export function dataPath(partial: Partial): string {
  return join(partial.directory, DATA);
}

/** Records the accepted upload and drops the bytes (the staged bundle holds them now). */
export async function markAccepted(partial: Partial, accepted: AcceptedUpload): Promise<void> {
  await writeDurably(partial.directory, ACCEPTED, `${JSON.stringify(accepted)}\n`);
  await unlink(dataPath(partial)).catch(() => undefined);
}

/** Removes a partial's bytes, keeping its declaration so a resume learns it expired. */
export async function dropBytes(partial: Partial): Promise<void> {
  await unlink(dataPath(partial)).catch(() => undefined);
}

export async function removePartial(directory: string): Promise<void> {
  await rm(directory, { recursive: true, force: true });
}

/** Every partial directory's id below `root`. */
export async function partialIds(root: string): Promise<string[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  return names
    .filter((name) => name.startsWith(PARTIAL_DIRECTORY_PREFIX))
    .map((name) => name.slice(PARTIAL_DIRECTORY_PREFIX.length));
}

/** Writes `name` in `directory` through a flushed temporary file and a rename, then flushes it. */
async function writeDurably(directory: string, name: string, text: string): Promise<void> {
  const temporary = join(directory, `.${name}.${randomBytes(6).toString("hex")}`);
  const handle = await open(temporary, "wx", 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, join(directory, name));
  const dir = await open(directory, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

async function readJson<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** How often a lock's holder marks it alive while bytes arrive. */
export const LOCK_REFRESH_MS = 2000;
/** A lock not marked alive for this long was left by a stalled or dead holder. */
export const LOCK_STALE_MS = 10_000;

export interface PartialLock {
  /** Marks the lock alive; false when another holder took it over meanwhile. */
  refresh(): Promise<boolean>;
  release(): Promise<void>;
}

/**
 * Takes the partial's lock, a file every instance sharing the staging directory sees: one
 * request writes a partial at a time. A lock not refreshed for `LOCK_STALE_MS` is taken over
 * (its holder died, or its connection stalled). `busy` while another holds it; `gone` when the
 * partial was removed.
 */
export async function lockPartial(
  partial: Partial,
  owner: string,
): Promise<PartialLock | "busy" | "gone"> {
  const path = join(partial.directory, LOCK);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, "wx", 0o600);
      try {
        await handle.writeFile(owner);
      } finally {
        await handle.close();
      }
      return heldLock(path, owner);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return "gone";
      if (code !== "EEXIST") throw error;
    }
    const found = await stat(path).catch(() => undefined);
    const fresh = found !== undefined && found.mtimeMs > Date.now() - LOCK_STALE_MS;
    if (fresh && !(await heldByDeadProcess(path))) return "busy";
    await unlink(path).catch(() => undefined);
  }
  return "busy";
}

/**
 * The name a lock records: host and process first, so that a process on the same host can tell
 * a lock left by one that died (kill -9, then a restart) without waiting for it to go stale.
 */
export function lockOwner(instanceId: string): string {
  return `${hostname()} ${process.pid} ${instanceId} ${randomBytes(6).toString("hex")}`;
}

async function heldByDeadProcess(path: string): Promise<boolean> {
  const [host, pid] = (await readFile(path, "utf8").catch(() => "")).split(" ");
  if (host !== hostname() || !/^\d+$/.test(pid ?? "")) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

function heldLock(path: string, owner: string): PartialLock {
  const mine = async () => (await readFile(path, "utf8").catch(() => "")) === owner;
  return {
    async refresh() {
      if (!(await mine())) return false;
      const now = new Date();
      await utimes(path, now, now).catch(() => undefined);
      return true;
    },
    async release() {
      if (await mine()) await unlink(path).catch(() => undefined);
    },
  };
}
