import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import type { AcceptedUpload } from "@distributor/upload-store";
import { sharedFlush } from "../staging/staging.js";
import {
  PARTIAL_DIRECTORY_PREFIX,
  type Partial,
  type PartialArchive,
  type PartialInfo,
  type PartialLock,
  PartialLockLostError,
  PartialMovedError,
  type PartialStore,
  PartialUnreadableError,
  type PartialWriter,
  validPartialId,
} from "./partial-store.js";

// Partials in a staging directory, so an instance that shares the directory can continue them:
// `partial-<id>/info.json` (what was declared at creation), `data` (the bytes received, in
// order), `lock` (one writer at a time) and, once accepted, `accepted.json`.
// docs/design/upload-service.md, "Resumable uploads".

const INFO = "info.json";
const DATA = "data";
const ACCEPTED = "accepted.json";
const LOCK = "lock";

/** Partials below the staging directory `root`, expiring `ttlMs` after their last bytes. */
export function directoryPartialStore(root: string, ttlMs: number): PartialStore {
  const directoryOf = (id: string) => join(root, `${PARTIAL_DIRECTORY_PREFIX}${id}`);
  return {
    location: root,
    create: (info) => createPartial(root, directoryOf(info.id), info),
    async read(id) {
      return validPartialId(id) ? readPartial(directoryOf(id), ttlMs) : undefined;
    },
    async ids() {
      const names = await readdir(root).catch(() => [] as string[]);
      return names
        .filter((name) => name.startsWith(PARTIAL_DIRECTORY_PREFIX))
        .map((name) => name.slice(PARTIAL_DIRECTORY_PREFIX.length));
    },
    async lastChanged(id) {
      return (await stat(directoryOf(id)).catch(() => undefined))?.mtimeMs;
    },
    lock: (partial, owner) => lockPartial(directoryOf(partial.info.id), owner),
    openWriter: (partial, offset, lock) =>
      openDataWriter(partial.info.id, join(directoryOf(partial.info.id), DATA), offset, lock),
    archive: (partial) =>
      dataArchive(join(directoryOf(partial.info.id), DATA), partial.info.length),
    async markAccepted(partial, accepted) {
      await writeDurably(directoryOf(partial.info.id), ACCEPTED, `${JSON.stringify(accepted)}\n`);
    },
    async dropBytes(partial) {
      await unlink(join(directoryOf(partial.info.id), DATA)).catch(() => undefined);
    },
    async remove(id) {
      if (validPartialId(id)) await rm(directoryOf(id), { recursive: true, force: true });
    },
  };
}
/**
 * Creates the partial's directory, its declaration and an empty data file, all flushed; false
 * when a partial with this id exists already (the caller reads it).
 */
async function createPartial(root: string, directory: string, info: PartialInfo) {
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

async function readPartial(directory: string, ttlMs: number): Promise<Partial | undefined> {
  const info = await readJson<PartialInfo>(join(directory, INFO));
  if (info === undefined) return undefined;
  const accepted = await readJson<AcceptedUpload>(join(directory, ACCEPTED));
  const acceptedAt =
    accepted === undefined
      ? undefined
      : ((await stat(join(directory, ACCEPTED)).catch(() => undefined))?.mtimeMs ?? Date.now());
  const held = await durableSize(join(directory, DATA));
  const lastWrite = held?.mtimeMs ?? info.createdAt;
  return {
    info,
    offset: accepted !== undefined ? info.length : (held?.size ?? 0),
    expiresAt:
      acceptedAt !== undefined ? acceptedAt + ttlMs : Math.max(info.createdAt, lastWrite) + ttlMs,
    accepted,
    acceptedAt,
    holdsBytes: held !== undefined,
    pieces: held === undefined ? 0 : 1,
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

/**
 * Writes a PATCH's bytes at explicit positions from `offset`, which is checked against the data
 * file's durable size once open: a request that took over a stale lock starts where the bytes
 * end, whatever its read before said. Taking bytes back (truncating) happens only while the lock
 * is still this request's: a holder that stalled past `LOCK_STALE_MS` and woke up never cuts what
 * the request that took over wrote since. docs/design/upload-service.md, "Two holders".
 */
async function openDataWriter(
  id: string,
  path: string,
  offset: number,
  lock: PartialLock,
): Promise<PartialWriter> {
  const file = await open(path, "r+");
  try {
    await file.sync();
    const { size } = await file.stat();
    if (size !== offset) throw new PartialMovedError(size);
  } catch (error) {
    await file.close();
    throw error;
  }
  let written = 0;
  return {
    async write(bytes) {
      // A write may take fewer bytes than asked (a full disk, a signal): the rest follows.
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await file.write(
          bytes,
          done,
          bytes.length - done,
          offset + written + done,
        );
        if (bytesWritten === 0) throw new Error(`writing ${path} made no progress`);
        done += bytesWritten;
      }
      written += bytes.length;
    },
    async commit() {
      await file.sync();
      // A holder whose lock was taken over reports nothing: the one that took over does.
      if (!(await lock.refresh())) throw new PartialLockLostError(id);
      const { size } = await file.stat();
      return Math.min(offset + written, size);
    },
    async discard() {
      if (!(await lock.refresh())) return;
      await file.truncate(offset);
      await file.sync();
      written = 0;
    },
    close: () => file.close(),
  };
}

/**
 * The data file's first `length` bytes, each pass reading it again; a file that is gone or
 * shorter, or a read that fails, is a `PartialUnreadableError`.
 */
function dataArchive(path: string, length: number): PartialArchive {
  const pass = async function* (): AsyncGenerator<Uint8Array> {
    let sent = 0;
    try {
      const stream = createReadStream(path, { start: 0, end: Math.max(0, length - 1) });
      if (length > 0) {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          sent += chunk.length;
          yield chunk;
        }
      } else stream.destroy();
    } catch (error) {
      throw new PartialUnreadableError(`reading ${path} failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (sent !== length) {
      throw new PartialUnreadableError(`${path} holds ${sent} of its ${length} bytes`);
    }
  };
  return { [Symbol.asyncIterator]: () => pass() };
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

/**
 * Takes the partial's lock, a file every instance sharing the staging directory sees: one
 * request writes a partial at a time. A lock not refreshed for `LOCK_STALE_MS` is taken over
 * (its holder died, or its connection stalled). `busy` while another holds it; `gone` when the
 * partial was removed.
 */
async function lockPartial(
  directory: string,
  owner: string,
): Promise<PartialLock | "busy" | "gone"> {
  const path = join(directory, LOCK);
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
