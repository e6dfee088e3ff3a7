import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { formatOwnerScope, type OwnerScope } from "@distributor/state";
import {
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  locatePath,
  type StorageBackend,
} from "@distributor/storage";
import { readBack, UNREADABLE } from "./commit-state.js";
import { Lease } from "./lease.js";
import {
  DEFAULT_LEASE_TTL_MS,
  defaultProcessAlive,
  isStale,
  journalBytesLimit,
  LEASE_FORMAT,
  LEASE_READ_LIMIT,
  type LeaseDocument,
  LeaseHeldError,
  type LeaseOptions,
  type LeaseReport,
  leaseReport,
  parseLease,
  serializeLease,
  WAIT_INTERVAL_MS,
} from "./lease-file.js";

// Taking a lease: a no-clobber create, waiting for a live holder, taking over a stale one.

/**
 * Takes the lease of the state file at `bundlePath` for `owner`: a no-clobber create of
 * `.distributor.lease.json`. A live lease of another run is waited for up to `lockTimeoutMs`,
 * then refused with a `LeaseHeldError` naming holder, host, pid and expiry. A stale lease is
 * taken over with a compare-and-swap (so of two runs breaking it, one wins) and its journal is
 * carried into ours, for the caller to recover before planning.
 */
export async function acquireLease(
  backend: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  options: LeaseOptions = {},
): Promise<Lease> {
  const now = () => options.now?.() ?? new Date();
  const processAlive = options.processAlive ?? defaultProcessAlive;
  const thisHost = hostname();
  const ttl = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
  const path = joinPrefix(bundlePath, LEASE_FILE_NAME);
  const deadline = now().getTime() + (options.lockTimeoutMs ?? 0);
  const fresh = (journal: string[], directories: string[]): LeaseDocument => {
    const at = now();
    return {
      format: LEASE_FORMAT,
      owner: { pipeline_id: owner.pipelineId, destination_id: owner.destinationId },
      run_id: randomUUID(),
      host: thisHost,
      pid: process.pid,
      acquired_at: at.toISOString(),
      expires_at: new Date(at.getTime() + ttl).toISOString(),
      journal,
      directories,
    };
  };
  const initial = options.initialJournal;
  const first = (): LeaseDocument => {
    if (initial === undefined) return fresh([], []);
    const document = {
      ...fresh([...new Set(initial.paths)], [...new Set(initial.directories)]),
      overwrites: [...new Set(initial.overwrites)],
    };
    const size = Buffer.byteLength(serializeLease(document), "utf8");
    return size > journalBytesLimit(options.limits).bytes ? fresh([], []) : document;
  };
  for (;;) {
    options.signal?.throwIfAborted();
    const document = first();
    const bytes = serializeLease(document);
    const started = now().getTime();
    try {
      const { version } = await backend.writeFile(path, bytes, {
        overwrite: false,
        contentType: "application/json",
        commit: true,
        signal: options.signal,
      });
      return new Lease(backend, bundlePath, document, version, options, undefined, started);
    } catch (error) {
      // The create may have happened with its answer lost (or an SDK retry saw it as taken).
      const ours = await readBack(backend, path, bytes, options.signal);
      if (ours !== undefined && ours !== UNREADABLE) {
        return new Lease(backend, bundlePath, document, ours, options, undefined, started);
      }
      if (!isStorageError(error, "already_exists")) throw error;
    }
    let found: { bytes: Uint8Array; version: string };
    try {
      found = await backend.readVersioned(path, {
        maxBytes: LEASE_READ_LIMIT,
        signal: options.signal,
      });
    } catch (error) {
      // Released between our create and our read: try again at once.
      if (isStorageError(error, "not_found")) continue;
      throw error;
    }
    const held = parseLease(Buffer.from(found.bytes).toString("utf8"));
    // An unreadable lease is stale once its file is older than a lease can live.
    const stale =
      held === undefined
        ? await unreadableLeaseIsStale(backend, path, now(), ttl)
        : isStale(held, now(), thisHost, processAlive);
    if (stale) {
      // The stale journal is carried over, so a crash during recovery loses nothing.
      const journal = held?.journal ?? [];
      const directories = held?.directories ?? [""];
      const overwrites = held?.overwrites ?? [];
      const takeover = { ...fresh(journal, directories), overwrites };
      const bytes = serializeLease(takeover);
      const started = now().getTime();
      const broken = { lease: held, journal, directories, overwrites };
      try {
        const { version } = await backend.writeFile(path, bytes, {
          ifMatch: found.version,
          contentType: "application/json",
          commit: true,
          signal: options.signal,
        });
        return new Lease(backend, bundlePath, takeover, version, options, broken, started);
      } catch (error) {
        const ours = await readBack(backend, path, bytes, options.signal);
        if (ours !== undefined && ours !== UNREADABLE) {
          return new Lease(backend, bundlePath, takeover, ours, options, broken, started);
        }
        // Another run broke it first, or it was released: look again.
        if (isStorageError(error, "conflict")) continue;
        throw error;
      }
    }
    if (now().getTime() >= deadline) {
      const holder = held === undefined ? undefined : leaseReport(held);
      throw heldError(path, holder, backend, options.lockTimeoutMs ?? 0);
    }
    await sleep(
      Math.min(WAIT_INTERVAL_MS, Math.max(1, deadline - now().getTime())),
      options.signal,
    );
  }
}

export async function unreadableLeaseIsStale(
  backend: StorageBackend,
  path: string,
  now: Date,
  ttl: number,
): Promise<boolean> {
  const entry = await backend.stat(path);
  const modified = entry.modifiedAt?.getTime() ?? now.getTime();
  return modified + ttl <= now.getTime();
}

export function heldError(
  path: string,
  holder: LeaseReport | undefined,
  backend: StorageBackend,
  waitedMs: number,
): LeaseHeldError | Error {
  const where = locatePath(backend.location, path);
  const waited = waitedMs > 0 ? ` after waiting ${waitedMs}ms` : "";
  if (holder === undefined) {
    return new Error(`${where} is an unreadable lease that has not expired yet${waited}`);
  }
  const who = formatOwnerScope({
    pipelineId: holder.owner.pipeline_id,
    destinationId: holder.owner.destination_id,
  });
  return new LeaseHeldError(
    `destination is locked${waited}: lease ${where} is held by run ${holder.run_id} of ${who} on host ${holder.host} (pid ${holder.pid}) until ${holder.expires_at}; retry later or raise --lock-timeout`,
    holder,
  );
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
