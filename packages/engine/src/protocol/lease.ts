import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
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

/** How long a lease lives unless renewed; renewals happen every third of it. */
export const DEFAULT_LEASE_TTL_MS = 60_000;
/** Pause between looks at a live lease while waiting for it. */
const WAIT_INTERVAL_MS = 200;
const LEASE_BYTES_LIMIT = 16 * 1024 * 1024;
const LEASE_FORMAT = "distributor-lease/1";

/**
 * What a lease file records (docs/design/commit-protocol.md): who holds the state file beside it, until when, and the
 * journal of paths (relative to the bundle path) the holder may create or is about to delete.
 */
export interface LeaseDocument {
  format: typeof LEASE_FORMAT;
  owner: { pipeline_id: string; destination_id: string };
  run_id: string;
  host: string;
  pid: number;
  acquired_at: string;
  expires_at: string;
  /** Paths the holder may create, or is deleting after its state write. */
  journal: string[];
  /** Directories (bundle-relative, `""` for the bundle path) where its temp files may be. */
  directories: string[];
  /** Journaled paths it replaces in place, which recovery checks against the state. */
  overwrites?: string[];
}

/** A lease found at a bundle path, as `inspect` and error messages show it. */
export interface LeaseReport {
  owner: { pipeline_id: string; destination_id: string };
  run_id: string;
  host: string;
  pid: number;
  acquired_at: string;
  expires_at: string;
  journal_entries: number;
}

/** A live lease held by another run outlasted `--lock-timeout`. */
export class LeaseHeldError extends Error {
  override readonly name = "LeaseHeldError";
  readonly code = "lease_held";
  readonly holder: LeaseReport;

  constructor(message: string, holder: LeaseReport) {
    super(message);
    this.holder = holder;
  }
}

/** Our lease was broken or replaced by another run while we held it. */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  readonly code = "lease_lost";
}

/**
 * A lease whose journal would make it larger than a lease may be read back: written, it would
 * stop every later run at that bundle path, which must read the lease to know whether it is
 * stale. The write is refused instead and the attempt fails before its first output.
 */
export class LeaseTooLargeError extends Error {
  override readonly name = "LeaseTooLargeError";
  readonly code = "lease_too_large";
}

export interface LeaseOptions {
  /** How long to wait for a live lease of another run (default 0: fail at once). */
  lockTimeoutMs?: number | undefined;
  /** Lifetime of the lease between renewals (tests shorten it). */
  ttlMs?: number | undefined;
  /** Renew the lease on a timer while held (default true). */
  renew?: boolean | undefined;
  now?: (() => Date) | undefined;
  signal?: AbortSignal | undefined;
  /** Tells whether a process of this host still runs (tests inject it). */
  processAlive?: ((pid: number) => boolean) | undefined;
  /**
   * A journal a fresh lease is created with (the plan made before it was taken), saving the
   * write that would record it next. A lease taken over from a dead run starts from that run's
   * journal instead; a journal too large for a lease is left for `journal`, which refuses it.
   */
  initialJournal?: { paths: string[]; directories: string[]; overwrites: string[] } | undefined;
}

/** Parses a lease file; anything unreadable is undefined (then only its age can make it stale). */
export function parseLease(text: string): LeaseDocument | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const doc = value as Partial<LeaseDocument>;
  if (
    typeof doc !== "object" ||
    doc === null ||
    doc.format !== LEASE_FORMAT ||
    typeof doc.run_id !== "string" ||
    typeof doc.host !== "string" ||
    typeof doc.pid !== "number" ||
    typeof doc.expires_at !== "string" ||
    Number.isNaN(Date.parse(doc.expires_at)) ||
    !Array.isArray(doc.journal) ||
    !doc.journal.every((path) => typeof path === "string") ||
    !Array.isArray(doc.directories) ||
    !doc.directories.every((path) => typeof path === "string") ||
    (doc.overwrites !== undefined &&
      (!Array.isArray(doc.overwrites) ||
        !doc.overwrites.every((path) => typeof path === "string"))) ||
    typeof doc.owner?.pipeline_id !== "string" ||
    typeof doc.owner?.destination_id !== "string"
  ) {
    return undefined;
  }
  return doc as LeaseDocument;
}

export function leaseReport(lease: LeaseDocument): LeaseReport {
  return {
    owner: { ...lease.owner },
    run_id: lease.run_id,
    host: lease.host,
    pid: lease.pid,
    acquired_at: lease.acquired_at,
    expires_at: lease.expires_at,
    journal_entries: lease.journal.length,
  };
}

/** True when nobody holds `lease` any more: it expired, or its process on this host is gone. */
export function isStale(
  lease: LeaseDocument,
  now: Date,
  thisHost: string,
  processAlive: (pid: number) => boolean,
): boolean {
  if (Date.parse(lease.expires_at) <= now.getTime()) return true;
  return lease.host === thisHost && !processAlive(lease.pid);
}

/**
 * Whether a process of this host still runs. A zombie (killed, not yet reaped by its parent)
 * still answers signal 0, but it holds nothing any more: on Linux its state in `/proc/<pid>/stat`
 * is `Z` (or `X`), and it counts as gone.
 */
export function defaultProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists, we just may not signal it.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  return !isZombie(pid);
}

function isZombie(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    // No procfs (macOS, a restricted container): signal 0 is all we can know.
    return false;
  }
  // The command name is in parentheses and may itself hold spaces or parentheses.
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X";
}

/** What `acquireLease` found before taking the lease over: a stale lease to recover. */
export interface BrokenLease {
  lease: LeaseDocument | undefined;
  /** Paths the stale holder may have created or was deleting (bundle-relative). */
  journal: string[];
  directories: string[];
  /** Of those, the paths it was replacing in place. */
  overwrites: string[];
}

/** A held lease: renewed on a timer, journaled before writes, released at the end. */
export class Lease {
  readonly bundlePath: string;
  readonly runId: string;
  /** The stale lease this one replaced, whose journal recovery must process first. */
  readonly broken: BrokenLease | undefined;
  #document: LeaseDocument;
  #version: string;
  readonly #backend: StorageBackend;
  readonly #options: LeaseOptions;
  #timer: NodeJS.Timeout | undefined;
  #lost: LeaseLostError | undefined;
  #queue: Promise<void> = Promise.resolve();
  #released = false;
  #ttlOverride: number | undefined;
  /** By this process's clock, the lease is surely ours until then: the last write's start + TTL. */
  #validUntil: number;
  #expiryTimer: NodeJS.Timeout | undefined;
  readonly #stop = new AbortController();

  constructor(
    backend: StorageBackend,
    bundlePath: string,
    document: LeaseDocument,
    version: string,
    options: LeaseOptions,
    broken: BrokenLease | undefined,
    validFrom: number,
  ) {
    // Every write of the run listens for the lease's loss: as many listeners as writes in flight.
    setMaxListeners(0, this.#stop.signal);
    this.#backend = backend;
    this.bundlePath = bundlePath;
    this.runId = document.run_id;
    this.#document = document;
    this.#version = version;
    this.#options = options;
    this.broken = broken;
    this.#validUntil = validFrom + this.#ttl;
    this.#armExpiry();
    if (options.renew ?? true) {
      const every = Math.max(1, Math.floor(this.#ttl / 3));
      this.#timer = setInterval(() => {
        // A renewal that fails stops the run's writes (docs/design/commit-protocol.md, fencing): `#update` records why.
        this.#update({}).catch((error: unknown) => this.#fail(error));
      }, every);
      this.#timer.unref();
    }
  }

  get #ttl(): number {
    return this.#options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
  }

  #now(): number {
    return (this.#options.now?.() ?? new Date()).getTime();
  }

  /**
   * Aborted once this run may no longer write under the lease: it was taken over, a renewal
   * failed, or its validity ran out without one. Writes listen to it, so the first of those
   * reaches the requests in flight.
   */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  /**
   * The margin kept before the lease's expiry: a mutation starts only while at least this much
   * of the lease is left, so that it ends (within the backend's request timeout) before another
   * run may judge the lease stale. Renewals every third of the TTL keep two thirds left.
   */
  get #margin(): number {
    return Math.floor(this.#ttl / 3);
  }

  /**
   * Fails when this run may not write any more: another run broke the lease (as far as this
   * process has seen), a renewal failed, or too little of the lease is left by this process's
   * clock (a stall past the lease: a paused VM, a long GC, SIGSTOP).
   */
  assertHeld(): void {
    if (this.#lost !== undefined) throw this.#lost;
    if (this.#stop.signal.aborted) throw this.#stop.signal.reason;
    const left = this.#validUntil - this.#now();
    if (left < this.#margin) {
      this.#fail(
        new LeaseLostError(
          `lease ${locatePath(this.#backend.location, this.#path)} of run ${this.runId} ${left <= 0 ? "expired" : "was about to expire"} without a renewal (this run stalled or could not reach the store); nothing more is written`,
        ),
      );
      throw this.#stop.signal.reason;
    }
  }

  /** Stops the run's writes for good, keeping the first reason. */
  #fail(error: unknown): void {
    if (this.#released || this.#stop.signal.aborted) return;
    const reason =
      error instanceof LeaseLostError
        ? error
        : new LeaseLostError(
            `lease ${locatePath(this.#backend.location, this.#path)} of run ${this.runId} could not be renewed: ${(error as Error)?.message ?? String(error)}; nothing more is written`,
            { cause: error },
          );
    this.#stop.abort(reason);
  }

  /** Aborts the writes when the lease's validity runs out without a renewal. */
  #armExpiry(): void {
    if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
    const wait = Math.max(0, this.#validUntil - this.#margin - this.#now());
    this.#expiryTimer = setTimeout(() => {
      this.#expiryTimer = undefined;
      try {
        this.assertHeld();
      } catch {
        // Recorded on the signal.
      }
    }, wait);
    this.#expiryTimer.unref();
  }

  #stopTimers(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
    this.#timer = undefined;
    this.#expiryTimer = undefined;
  }

  /**
   * Proves the lease is still ours right now, by renewing it with a compare-and-swap: a run that
   * stalled past its expiry and was broken by another learns it here, before committing or
   * cleaning up anything the new holder now owns.
   */
  async confirm(): Promise<void> {
    await this.#update({});
  }

  /** True once this run knows another run took the lease over. */
  get lost(): boolean {
    return this.#lost !== undefined;
  }

  /**
   * Records, before the first write, the paths an attempt may create or will delete after its
   * state write, and the directories its temp files may appear in (all bundle-relative).
   */
  async journal(
    paths: readonly string[],
    directories: readonly string[],
    overwrites: readonly string[] = [],
  ): Promise<void> {
    const changes = {
      journal: [...new Set([...this.#document.journal, ...paths])],
      directories: [...new Set([...this.#document.directories, ...directories])],
      overwrites: [...new Set([...(this.#document.overwrites ?? []), ...overwrites])],
    };
    // Already journaled (the lease was created with this journal): nothing to write.
    const unchanged =
      changes.journal.length === this.#document.journal.length &&
      changes.directories.length === this.#document.directories.length &&
      changes.overwrites.length === (this.#document.overwrites ?? []).length;
    if (unchanged) return;
    // The journal is the only part of a lease that grows; renewals, confirmations and
    // abandoning rewrite it unchanged or smaller.
    const bytes = Buffer.byteLength(serializeLease({ ...this.#document, ...changes }), "utf8");
    const limit = LEASE_BYTES_LIMIT - TAKEOVER_HEADROOM_BYTES;
    if (bytes > limit) {
      throw new LeaseTooLargeError(
        `lease ${locatePath(this.#backend.location, this.#path)} would be ${bytes} bytes, more than the ${limit} a journaled lease may have (a lease is read back up to ${LEASE_BYTES_LIMIT}): the attempt journals ${changes.journal.length} paths; nothing was written`,
      );
    }
    await this.#update(changes);
  }

  /** The paths journaled so far (carried over from a broken lease, and added since). */
  get journaled(): readonly string[] {
    return [...this.#document.journal];
  }

  /** Empties the journal once what it listed is either recorded in state or gone. */
  async clearJournal(): Promise<void> {
    const { journal, directories, overwrites } = this.#document;
    if (journal.length === 0 && directories.length === 0 && (overwrites ?? []).length === 0) {
      return;
    }
    await this.#update({ journal: [], directories: [], overwrites: [] });
  }

  /**
   * Gives the lease up without removing it: its journal becomes `pending` (and the paths it
   * replaced in place `overwrites`, when given) and it expires now, so the next run recovers it
   * at once and deletes what this run could not. Never throws.
   */
  async abandon(pending: readonly string[], overwrites?: readonly string[]): Promise<void> {
    if (this.#released) return;
    this.#stopTimers();
    this.#ttlOverride = 0;
    const changes = overwrites === undefined ? {} : { overwrites: [...overwrites] };
    // Only while still ours: a lease another run took over is not ours to rewrite.
    await this.#update({ journal: [...pending], ...changes }, { fenced: false }).catch(
      () => undefined,
    );
    this.#released = true;
  }

  /**
   * Stops renewing and removes the lease file if it is still ours: the delete is fenced by the
   * version this run last wrote, so a lease another run took over meanwhile stays. Never throws.
   * With `pruneEmptyDirs`, directories the delete leaves empty go too (a bundle path whose state
   * and outputs were all removed under this lease).
   */
  async release(options: { pruneEmptyDirs?: boolean } = {}): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    this.#stopTimers();
    await this.#queue.catch(() => undefined);
    if (this.#lost !== undefined) return;
    try {
      await this.#deleteIfOurs(this.#version, options.pruneEmptyDirs);
    } catch (error) {
      // A write of ours whose answer was lost leaves a version this run never learnt: read the
      // lease back, and when it is still this run's, delete it at the version it holds.
      if (!isStorageError(error, "conflict")) return;
      try {
        const found = await this.#backend.readVersioned(this.#path, {
          maxBytes: LEASE_BYTES_LIMIT,
        });
        const lease = parseLease(Buffer.from(found.bytes).toString("utf8"));
        if (lease?.run_id === this.runId) {
          await this.#deleteIfOurs(found.version, options.pruneEmptyDirs);
        }
      } catch {
        // A lease left behind is stale once our process is gone; the next run recovers it.
      }
    }
  }

  #deleteIfOurs(version: string, pruneEmptyDirs = false): Promise<void> {
    return this.#backend.deletePaths(this.bundlePath, [LEASE_FILE_NAME], {
      ignoreMissing: true,
      pruneEmptyDirs,
      ifMatch: new Map([[LEASE_FILE_NAME, version]]),
    });
  }

  get #path(): string {
    return joinPrefix(this.bundlePath, LEASE_FILE_NAME);
  }

  /**
   * Rewrites the lease (renewed expiry, changes applied) as a compare-and-swap, in order. A
   * failed swap is resolved by reading the lease back (docs/design/commit-protocol.md, ambiguous outcomes): the write
   * may have happened with its answer lost, and an SDK retry may even have seen its own write as
   * a conflict. Only bytes other than ours mean the lease was taken over.
   */
  #update(changes: Partial<LeaseDocument>, how: { fenced?: boolean } = {}): Promise<void> {
    const next = this.#queue.then(async () => {
      if (how.fenced ?? true) this.assertHeld();
      else if (this.#lost !== undefined) throw this.#lost;
      const started = this.#now();
      const ttl = this.#ttlOverride ?? this.#ttl;
      const document: LeaseDocument = {
        ...this.#document,
        ...changes,
        expires_at: new Date(started + ttl).toISOString(),
      };
      const bytes = serializeLease(document);
      let version: string;
      try {
        ({ version } = await this.#backend.writeFile(this.#path, bytes, {
          ifMatch: this.#version,
          contentType: "application/json",
          commit: true,
          signal: this.#ttlOverride === 0 ? undefined : AbortSignal.timeout(Math.max(1, ttl)),
        }));
      } catch (error) {
        const found = await readBack(this.#backend, this.#path, bytes);
        if (found === UNREADABLE) throw error;
        if (found === undefined) {
          if (!isStorageError(error, "conflict") && !isStorageError(error, "not_found")) {
            throw error;
          }
          this.#lost = new LeaseLostError(
            `lease ${locatePath(this.#backend.location, this.#path)} of run ${this.runId} expired and was taken over by another run; nothing more was committed`,
          );
          this.#fail(this.#lost);
          throw this.#lost;
        }
        version = found;
      }
      this.#document = document;
      this.#version = version;
      if (this.#ttlOverride === undefined) {
        this.#validUntil = started + ttl;
        this.#armExpiry();
      }
    });
    this.#queue = next.catch(() => undefined);
    return next;
  }
}

export function serializeLease(document: LeaseDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/**
 * Room a journaled lease leaves below `LEASE_BYTES_LIMIT` for what a takeover rewrites: the new
 * holder's owner ids (up to 128 characters each), host name, pid and run id. A takeover is never
 * refused for its size, since a stale lease must always be recoverable; this room makes sure the
 * lease it writes can still be read back.
 */
const TAKEOVER_HEADROOM_BYTES = 4096;

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
    return size > LEASE_BYTES_LIMIT - TAKEOVER_HEADROOM_BYTES ? fresh([], []) : document;
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
        maxBytes: LEASE_BYTES_LIMIT,
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

async function unreadableLeaseIsStale(
  backend: StorageBackend,
  path: string,
  now: Date,
  ttl: number,
): Promise<boolean> {
  const entry = await backend.stat(path);
  const modified = entry.modifiedAt?.getTime() ?? now.getTime();
  return modified + ttl <= now.getTime();
}

function heldError(
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

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
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

/** A lease found at a bundle path: whether its holder still counts, and who it is. */
export interface LeaseHolder {
  status: "live" | "stale";
  /** Undefined for a lease file that cannot be parsed (judged live: it may be being written). */
  owner: LeaseDocument["owner"] | undefined;
}

/**
 * Reads the lease at `bundlePath`, without taking it: undefined when there is none; otherwise
 * whether it is live or stale (expired, or its holder's process is gone) and whose it is.
 */
export async function readLeaseHolder(
  backend: StorageBackend,
  bundlePath: string,
  options: Pick<LeaseOptions, "now" | "processAlive" | "signal"> = {},
): Promise<LeaseHolder | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await backend.readFile(joinPrefix(bundlePath, LEASE_FILE_NAME), {
      maxBytes: LEASE_BYTES_LIMIT,
      signal: options.signal,
    });
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
  const lease = parseLease(Buffer.from(bytes).toString("utf8"));
  if (lease === undefined) return { status: "live", owner: undefined };
  const now = options.now?.() ?? new Date();
  const stale = isStale(lease, now, hostname(), options.processAlive ?? defaultProcessAlive);
  return { status: stale ? "stale" : "live", owner: lease.owner };
}

/** Whether a lease is at `bundlePath`, and if so whether it is live or stale. */
export async function leaseStatus(
  backend: StorageBackend,
  bundlePath: string,
  options: Pick<LeaseOptions, "now" | "processAlive" | "signal"> = {},
): Promise<"absent" | "live" | "stale"> {
  return (await readLeaseHolder(backend, bundlePath, options))?.status ?? "absent";
}

/** Reads the lease at a bundle path for reports; undefined when there is none. */
export async function readLease(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<LeaseReport | undefined> {
  try {
    const bytes = await backend.readFile(joinPrefix(bundlePath, LEASE_FILE_NAME), {
      maxBytes: LEASE_BYTES_LIMIT,
      signal,
    });
    const lease = parseLease(Buffer.from(bytes).toString("utf8"));
    return lease === undefined ? undefined : leaseReport(lease);
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
}
