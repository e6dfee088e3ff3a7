import { randomBytes } from "node:crypto";
import { isStorageError, type StorageBackend, type StorageEntry } from "@distributor/storage";
import type { AcceptedUpload } from "@distributor/upload-store";
import { CHUNK_BYTES, type Chunk, chunkName, coverage, maxPieces, parseChunk } from "./chunks.js";
import {
  PARTIAL_DIRECTORY_PREFIX,
  type PartialArchive,
  PartialGoneError,
  type PartialInfo,
  type PartialStore,
  PartialUnreadableError,
  validPartialId,
} from "./partial-store.js";

// Partials in an S3 staging bucket/prefix, so any instance continues them: below
// `<prefix>/partial-<id>/`, `info.json` (the declaration, with its incarnation), the bytes as
// chunk objects (chunks.ts) each PUT whole as the PATCH body arrives, `alive.json` rewritten while
// a PATCH receives (so a slow one keeps its partial from expiring), `accepted.json` once accepted,
// and `expired.json` once expiry removed the bytes. No object is ever written conditionally (Ceph
// RGW before 17 ignores If-None-Match) and nothing is locked: every offset reported is the
// coverage a LIST of complete chunk objects of the current incarnation shows, which duplicate or
// overlapping writes of the same bytes never change. docs/design/upload-service.md, "Partials on
// S3 staging".

const INFO = "info.json";
const ACCEPTED = "accepted.json";
const EXPIRED = "expired.json";
const ALIVE = "alive.json";
/**
 * The most objects one LIST of a partial may return: its chunks are capped (`maxPieces`, far
 * below this for any `max_upload_size` up to tens of GiB), plus its records and what writers of
 * earlier incarnations left.
 */
const LISTING_LIMIT = 10_000;
/** The incarnation of a declaration written before incarnations existed. */
const LEGACY = "legacy";

/** What one LIST of a partial's prefix says. */
interface Scan {
  entries: StorageEntry[];
  info: boolean;
  acceptedAt: number | undefined;
  expired: boolean;
  /** Newest LastModified of its chunks of any incarnation and of `alive.json` (epoch ms). */
  newest: number;
}

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
  const scan = async (id: string): Promise<Scan> => {
    const entries = await list(id);
    const found: Scan = { entries, info: false, acceptedAt: undefined, expired: false, newest: 0 };
    for (const entry of entries) {
      const name = baseName(entry.path);
      const at = entry.modifiedAt?.getTime() ?? 0;
      if (name === INFO) found.info = true;
      else if (name === ACCEPTED) found.acceptedAt = at;
      else if (name === EXPIRED) found.expired = true;
      else if (name === ALIVE || name.startsWith("chunk-"))
        found.newest = Math.max(found.newest, at);
    }
    return found;
  };
  /** The chunks of `incarnation` a listing holds; more than the partial may have is refused. */
  const chunksOf = (entries: readonly StorageEntry[], incarnation: string): Chunk[] => {
    const chunks: Chunk[] = [];
    for (const entry of entries) {
      const chunk = parseChunk(baseName(entry.path), entry.modifiedAt?.getTime());
      if (chunk !== undefined && chunk.incarnation === incarnation) chunks.push(chunk);
    }
    return chunks;
  };
  const readJson = async <T>(id: string, name: string): Promise<T> =>
    JSON.parse(Buffer.from(await backend.readFile(`${prefixOf(id)}/${name}`)).toString("utf8"));
  const writeJson = (id: string, name: string, value: unknown) =>
    backend.writeFile(`${prefixOf(id)}/${name}`, `${JSON.stringify(value)}\n`, {
      overwrite: true,
      contentType: "application/json",
    });
  const incarnationOf = (info: PartialInfo) => info.incarnation ?? LEGACY;
  /**
   * Fails unless the partial is still the incarnation `info` declared, neither expired nor (when
   * `acceptedToo` is false) accepted meanwhile; the listing it checked.
   */
  const current = async (info: PartialInfo, acceptedToo: boolean): Promise<StorageEntry[]> => {
    const found = await scan(info.id);
    const where = `partial ${info.id} in ${backend.location}`;
    const stored = found.info
      ? await readJson<PartialInfo>(info.id, INFO).catch(notFoundAs(undefined))
      : undefined;
    if (stored === undefined || incarnationOf(stored) !== incarnationOf(info)) {
      throw new PartialGoneError(`${where} was removed or created again`, "removed");
    }
    if (found.acceptedAt !== undefined && !acceptedToo) {
      throw new PartialGoneError(`${where} was accepted meanwhile`, "accepted");
    }
    if (found.expired && found.acceptedAt === undefined) {
      throw new PartialGoneError(`${where} expired`, "expired");
    }
    return found.entries;
  };
  const deleteBytes = async (id: string) => {
    const names: string[] = [];
    for (const entry of await list(id)) {
      const name = baseName(entry.path);
      if (name.startsWith("chunk-") || name === ALIVE) names.push(name);
    }
    if (names.length > 0) await backend.deletePaths(prefixOf(id), names, { ignoreMissing: true });
  };

  return {
    location: backend.location,
    async create(info) {
      // Check, then put, then read back: of two creations that both found none, the one whose
      // declaration stands wins; the other's writer fails its first commit (another incarnation).
      if ((await scan(info.id)).info) return false;
      await writeJson(info.id, INFO, info);
      const stored = await readJson<PartialInfo>(info.id, INFO).catch(notFoundAs(undefined));
      return stored !== undefined && incarnationOf(stored) === incarnationOf(info);
    },
    async read(id) {
      if (!validPartialId(id)) return undefined;
      const found = await scan(id);
      if (!found.info) return undefined;
      const info = await readJson<PartialInfo>(id, INFO).catch(notFoundAs(undefined));
      if (info === undefined) return undefined;
      const accepted =
        found.acceptedAt !== undefined
          ? await readJson<AcceptedUpload>(id, ACCEPTED).catch(notFoundAs(undefined))
          : undefined;
      const chunks = chunksOf(found.entries, incarnationOf(info));
      const lastWrite = Math.max(info.createdAt, found.newest);
      return {
        info,
        offset: accepted !== undefined ? info.length : coverage(chunks).covered,
        expiresAt:
          accepted !== undefined ? (found.acceptedAt as number) + ttlMs : lastWrite + ttlMs,
        accepted,
        acceptedAt: accepted === undefined ? undefined : found.acceptedAt,
        holdsBytes: chunks.length > 0,
        pieces: chunks.length,
        expired: accepted === undefined && found.expired,
      };
    },
    async ids() {
      const entries = await backend
        .walk("", { recursive: false, limit: LISTING_LIMIT * 10 })
        .catch(notFoundAs([] as StorageEntry[]));
      const ids: string[] = [];
      for (const entry of entries) {
        if (entry.path.startsWith(PARTIAL_DIRECTORY_PREFIX)) {
          ids.push(entry.path.slice(PARTIAL_DIRECTORY_PREFIX.length));
        }
      }
      return ids;
    },
    async lastChanged(id) {
      if (!validPartialId(id)) return undefined;
      let newest: number | undefined;
      for (const entry of await list(id)) {
        newest = Math.max(newest ?? 0, entry.modifiedAt?.getTime() ?? 0);
      }
      return newest;
    },
    // Nothing to lock: see the file's comment. A request of this instance writing the same
    // partial is still stopped first (routes/resumable-partial.ts, `takeLock`); refreshing marks
    // the partial alive while a PATCH receives bytes slower than a chunk fills.
    lock: async (partial) => ({
      async refresh() {
        await writeJson(partial.info.id, ALIVE, { at: Date.now() });
        return true;
      },
      release: async () => undefined,
    }),
    async openWriter(partial, offset, _lock, expected) {
      const { id, length } = partial.info;
      const incarnation = incarnationOf(partial.info);
      const writer = randomBytes(6).toString("hex");
      const mine: string[] = [];
      const room = Math.max(1, Math.min(CHUNK_BYTES, length - offset, expected ?? CHUNK_BYTES));
      let buffer: Buffer | undefined;
      let filled = 0;
      let flushed = offset;
      const flush = async () => {
        if (buffer === undefined || filled === 0) return;
        const name = chunkName(flushed, filled, incarnation, writer);
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
            buffer ??= Buffer.allocUnsafe(room);
            const copied = bytes.copy(buffer, filled, from);
            filled += copied;
            from += copied;
            if (filled === buffer.length) await flush();
          }
        },
        async commit() {
          await flush();
          const entries = await current(partial.info, false);
          return coverage(chunksOf(entries, incarnation)).covered;
        },
        async discard() {
          filled = 0;
          const names = mine.splice(0);
          if (names.length > 0) {
            await backend.deletePaths(prefixOf(id), names, { ignoreMissing: true });
          }
        },
        async close() {
          buffer = undefined;
        },
      };
    },
    archive(partial) {
      let steps: ReturnType<typeof coverage>["steps"] | undefined;
      const { id, length } = partial.info;
      const where = `partial ${id} in ${backend.location}`;
      const unreadable = (what: string, cause?: unknown) =>
        new PartialUnreadableError(`${where}: ${what}`, { cause });
      // One listing for every pass over the archive (the checksum's, then the acceptance's).
      const plan = async () => {
        if (steps !== undefined) return steps;
        let entries: StorageEntry[];
        try {
          entries = await current(partial.info, true);
        } catch (error) {
          if (error instanceof PartialGoneError) throw error;
          throw unreadable(`listing failed: ${errorText(error)}`, error);
        }
        const chunks = chunksOf(entries, incarnationOf(partial.info));
        if (chunks.length > maxPieces(length)) throw unreadable(`${chunks.length} chunks`);
        const found = coverage(chunks);
        if (found.covered < length) {
          throw unreadable(`holds ${found.covered} of its ${length} bytes`);
        }
        steps = found.steps;
        return steps;
      };
      const pass = async function* (): AsyncGenerator<Uint8Array> {
        let sent = 0;
        for (const { chunk, skip } of await plan()) {
          const size = chunk.end - chunk.start;
          let bytes: Uint8Array;
          try {
            bytes = await backend.readFile(`${prefixOf(id)}/${chunk.name}`, { maxBytes: size });
          } catch (error) {
            throw unreadable(`reading ${chunk.name} failed: ${errorText(error)}`, error);
          }
          if (bytes.length !== size) {
            throw unreadable(`${chunk.name} holds ${bytes.length} bytes, its name says ${size}`);
          }
          const wanted = bytes.subarray(skip, skip + (length - sent));
          sent += wanted.length;
          yield wanted;
        }
        if (sent !== length) throw unreadable(`read ${sent} of its ${length} bytes`);
      };
      const archive: PartialArchive = { [Symbol.asyncIterator]: () => pass() };
      return archive;
    },
    async markAccepted(partial, accepted) {
      await writeJson(partial.info.id, ACCEPTED, accepted);
    },
    async dropBytes(partial) {
      const id = partial.info.id;
      // The marker first: a crash between the two leaves an expired partial, never one that
      // reads as fresh and empty. An accepted partial's record says what it is already.
      if (partial.accepted === undefined) await writeJson(id, EXPIRED, { at: Date.now() });
      await deleteBytes(id);
    },
    async remove(id) {
      if (validPartialId(id)) await backend.deletePrefix(prefixOf(id), { ignoreMissing: true });
    },
  };
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function notFoundAs<T>(value: T) {
  return (error: unknown): T => {
    if (isStorageError(error) && error.kind === "not_found") return value;
    throw error;
  };
}
