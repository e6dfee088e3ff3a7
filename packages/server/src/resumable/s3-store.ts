import { randomBytes } from "node:crypto";
import { isStorageError, type StorageBackend, type StorageEntry } from "@distributor/storage";
import type { AcceptedUpload } from "@distributor/upload-store";
import { CHUNK_BYTES, type Chunk, chunkName, coverage, parseChunk } from "./chunks.js";
import {
  PARTIAL_DIRECTORY_PREFIX,
  type Partial,
  type PartialInfo,
  type PartialLock,
  type PartialStore,
  validPartialId,
} from "./partial-store.js";

// Partials in an S3 staging bucket/prefix, so any instance continues them: below
// `<prefix>/partial-<id>/`, `info.json` (the declaration), the bytes as chunk objects (chunks.ts)
// each PUT whole as the PATCH body arrives, `accepted.json` once accepted, and `expired.json`
// once expiry removed the bytes. No object is ever written conditionally (Ceph RGW before 17
// ignores If-None-Match) and nothing is locked: every offset reported is the coverage a LIST of
// complete chunk objects shows, which duplicate or overlapping writes of the same bytes never
// change. docs/design/upload-service.md, "Partials on S3 staging".

const INFO = "info.json";
const ACCEPTED = "accepted.json";
const EXPIRED = "expired.json";
/** More objects than any partial holds (its chunks, even written twice over, and three records). */
const LISTING_LIMIT = 1_000_000;

/** Partials below `backend`'s root (the staging prefix), expiring `ttlMs` after their last bytes. */
export function s3PartialStore(backend: StorageBackend, ttlMs: number): PartialStore {
  const prefixOf = (id: string) => `${PARTIAL_DIRECTORY_PREFIX}${id}`;
  const list = async (id: string): Promise<StorageEntry[]> => {
    try {
      return await backend.walk(prefixOf(id), { recursive: false, limit: LISTING_LIMIT });
    } catch (error) {
      if (isStorageError(error) && error.kind === "not_found") return [];
      throw error;
    }
  };
  const chunksOf = (entries: readonly StorageEntry[]): Chunk[] =>
    entries.flatMap((entry) => {
      const chunk = parseChunk(baseName(entry.path), entry.modifiedAt?.getTime());
      return chunk === undefined ? [] : [chunk];
    });
  const readJson = async <T>(id: string, name: string): Promise<T> =>
    JSON.parse(Buffer.from(await backend.readFile(`${prefixOf(id)}/${name}`)).toString("utf8"));
  const deleteChunks = async (id: string, names: readonly string[]) => {
    if (names.length > 0) await backend.deletePaths(prefixOf(id), names, { ignoreMissing: true });
  };

  return {
    location: backend.location,
    async create(info) {
      const path = `${prefixOf(info.id)}/${INFO}`;
      // Check, then put: two creations of one id (one idempotency key, two instances) both write
      // the same declaration, and either copy serves.
      if ((await list(info.id)).some((entry) => baseName(entry.path) === INFO)) return false;
      await backend.writeFile(path, `${JSON.stringify(info)}\n`, {
        overwrite: true,
        contentType: "application/json",
      });
      return true;
    },
    async read(id) {
      if (!validPartialId(id)) return undefined;
      const entries = await list(id);
      const names = new Set(entries.map((entry) => baseName(entry.path)));
      if (!names.has(INFO)) return undefined;
      const info = await readJson<PartialInfo>(id, INFO).catch(notFoundAs(undefined));
      if (info === undefined) return undefined;
      const accepted = names.has(ACCEPTED)
        ? await readJson<AcceptedUpload>(id, ACCEPTED).catch(notFoundAs(undefined))
        : undefined;
      const chunks = chunksOf(entries);
      const lastWrite = Math.max(info.createdAt, ...chunks.map((chunk) => chunk.modifiedAt ?? 0));
      return {
        info,
        offset: accepted !== undefined ? info.length : coverage(chunks).covered,
        expiresAt: lastWrite + ttlMs,
        accepted,
        expired: accepted === undefined && names.has(EXPIRED),
      };
    },
    async ids() {
      const entries = await backend
        .walk("", { recursive: false, limit: LISTING_LIMIT })
        .catch(notFoundAs([] as StorageEntry[]));
      return entries
        .filter((entry) => entry.path.startsWith(PARTIAL_DIRECTORY_PREFIX))
        .map((entry) => entry.path.slice(PARTIAL_DIRECTORY_PREFIX.length));
    },
    async lastChanged(id) {
      if (!validPartialId(id)) return undefined;
      const times = (await list(id)).map((entry) => entry.modifiedAt?.getTime() ?? 0);
      return times.length === 0 ? undefined : Math.max(...times);
    },
    // Nothing to lock: see the file's comment. A request of this instance writing the same
    // partial is still stopped first (routes/resumable-partial.ts, `takeLock`).
    lock: async () => unlocked,
    async openWriter(partial, offset) {
      const id = partial.info.id;
      const writer = randomBytes(6).toString("hex");
      const mine: string[] = [];
      let buffer: Buffer | undefined;
      let filled = 0;
      let flushed = offset;
      const flush = async () => {
        if (buffer === undefined || filled === 0) return;
        const name = chunkName(flushed, filled, writer);
        await backend.writeFile(`${prefixOf(id)}/${name}`, buffer.subarray(0, filled), {
          overwrite: true,
          size: filled,
          contentType: "application/octet-stream",
        });
        mine.push(name);
        flushed += filled;
        filled = 0;
      };
      return {
        async write(bytes) {
          let from = 0;
          while (from < bytes.length) {
            buffer ??= Buffer.allocUnsafe(CHUNK_BYTES);
            const copied = bytes.copy(buffer, filled, from);
            filled += copied;
            from += copied;
            if (filled === CHUNK_BYTES) await flush();
          }
        },
        async commit() {
          await flush();
          return coverage(chunksOf(await list(id))).covered;
        },
        async discard() {
          filled = 0;
          await deleteChunks(id, mine.splice(0));
        },
        async close() {
          buffer = undefined;
        },
      };
    },
    async *archive(partial) {
      const id = partial.info.id;
      const { covered, steps } = coverage(chunksOf(await list(id)));
      if (covered < partial.info.length) {
        throw new Error(
          `partial ${id} in ${backend.location} holds ${covered} of its ${partial.info.length} bytes`,
        );
      }
      let sent = 0;
      for (const { chunk, skip } of steps) {
        const bytes = await backend.readFile(`${prefixOf(id)}/${chunk.name}`, {
          maxBytes: chunk.end - chunk.start,
        });
        const wanted = bytes.subarray(skip, skip + (partial.info.length - sent));
        sent += wanted.length;
        yield wanted;
      }
    },
    async markAccepted(partial, accepted) {
      const id = partial.info.id;
      await backend.writeFile(`${prefixOf(id)}/${ACCEPTED}`, `${JSON.stringify(accepted)}\n`, {
        overwrite: true,
        contentType: "application/json",
      });
      await deleteChunks(
        id,
        chunksOf(await list(id)).map((chunk) => chunk.name),
      );
    },
    async dropBytes(partial) {
      const id = partial.info.id;
      // The marker first: a crash between the two leaves an expired partial, never one that
      // reads as fresh and empty.
      await backend.writeFile(
        `${prefixOf(id)}/${EXPIRED}`,
        `${JSON.stringify({ at: Date.now() })}\n`,
        {
          overwrite: true,
          contentType: "application/json",
        },
      );
      await deleteChunks(
        id,
        chunksOf(await list(id)).map((chunk) => chunk.name),
      );
    },
    async remove(id) {
      if (validPartialId(id)) await backend.deletePrefix(prefixOf(id), { ignoreMissing: true });
    },
  };
}

const unlocked: PartialLock = {
  refresh: async () => true,
  release: async () => undefined,
};

function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function notFoundAs<T>(value: T) {
  return (error: unknown): T => {
    if (isStorageError(error) && error.kind === "not_found") return value;
    throw error;
  };
}
