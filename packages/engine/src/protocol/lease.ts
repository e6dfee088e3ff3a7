import { setMaxListeners } from "node:events";
import {
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  locatePath,
  type StorageBackend,
} from "@distributor/storage";
import { readBack, UNREADABLE } from "./commit-state.js";
import {
  type BrokenLease,
  DEFAULT_LEASE_TTL_MS,
  journalBytesLimit,
  LEASE_READ_LIMIT,
  type LeaseDocument,
  LeaseLostError,
  type LeaseOptions,
  LeaseTooLargeError,
  parseLease,
  serializeLease,
} from "./lease-file.js";

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
    // Already journaled, as the lease usually was when it was created for this very plan: a
    // comparison, without the sets of a million paths below (half a second of held event loop).
    const document = this.#document;
    if (
      sameList(document.journal, paths) &&
      sameList(document.directories, directories) &&
      sameList(document.overwrites ?? [], overwrites)
    ) {
      return;
    }
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
    const limit = journalBytesLimit(this.#options.limits);
    if (bytes > limit.bytes) {
      const bound =
        limit.setting === undefined
          ? `the ${limit.bytes} a journaled lease may have`
          : `the ${limit.bytes} a journaled lease may have (${limit.setting}; raise it to journal more)`;
      throw new LeaseTooLargeError(
        `lease ${locatePath(this.#backend.location, this.#path)} would be ${bytes} bytes, more than ${bound}: the attempt journals ${changes.journal.length} paths; nothing was written`,
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
          maxBytes: LEASE_READ_LIMIT,
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
    // A commit: what the journal covers is durable before the lease that journals it goes.
    return this.#backend.deletePaths(this.bundlePath, [LEASE_FILE_NAME], {
      ignoreMissing: true,
      commit: true,
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

/** Whether two lists hold the same items in the same order. */
function sameList(left: readonly string[], right: readonly string[]): boolean {
  if (left.length !== right.length) return false;
  for (let index = 0; index < left.length; index++) {
    if (left[index] !== right[index]) return false;
  }
  return true;
}
