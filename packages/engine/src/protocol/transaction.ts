import type { OwnerScope, StateDocument } from "@distributor/state";
import { locatePath, STATE_FILE_NAME, type StorageBackend, statePath } from "@distributor/storage";
import { compareAndSwapState } from "./commit-state.js";
import { deleteFenced, type StoredVersion, storedVersions } from "./delete-after.js";
import { holdLease } from "./hold-lease.js";
import type { Lease } from "./lease.js";
import type { LeaseOptions } from "./lease-file.js";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "./limits.js";
import { PendingDeletesError } from "./pending.js";
import { type DestinationStateRead, encodeStateFile, readDestinationStatus } from "./state-file.js";

// The one way to change a state file without publishing (docs/design/commit-protocol.md, "State
// transactions"): the lease, the journal, the confirmation, the compare-and-swap, fenced deletes.

export interface StateTransactionOptions {
  /** Read only: no lease is taken, and the body may not journal, commit or delete. */
  dryRun?: boolean | undefined;
  /** How the lease is taken and kept: `lockTimeoutMs` to wait for another run's, `ttlMs`, ... */
  lease?: Omit<LeaseOptions, "signal" | "limits" | "initialJournal"> | undefined;
  signal?: AbortSignal | undefined;
  /**
   * The destination's bounds (default `DEFAULT_DESTINATION_LIMITS`): the state is read and
   * written within `stateBytes`, and a recovery the lease runs lists within `entries`.
   */
  limits?: DestinationLimits | undefined;
}

/** What a change records in the lease before it commits (all paths bundle-relative). */
export interface TransactionJournal {
  /** Paths the change deletes once its state is committed (`deleteAfter`). */
  deletes?: readonly string[] | undefined;
  /** Directories where its temp files may appear (`""`: the bundle path itself). */
  directories?: readonly string[] | undefined;
}

/** A next state encoded for its compare-and-swap: valid, and within the destination's bound. */
export interface PreparedState {
  readonly document: StateDocument;
  readonly bytes: Uint8Array;
}

export interface DeleteAfterOptions {
  /** Called for each path once it is gone (deleted now, or already missing before the journal). */
  onDeleted?: ((path: string) => void) | undefined;
  /** The message of the failure that stops the deletes at `path` (an interruption included). */
  failureMessage?: ((path: string, error: unknown) => string) | undefined;
}

/** What the body of `withStateTransaction` reads from and changes the state through. */
export interface StateTransaction {
  readonly bundlePath: string;
  readonly dryRun: boolean;
  /**
   * The state as it was read under the lease, before the body ran (absent, invalid with its
   * reason, or the document), with its version: what the body plans from.
   */
  readonly read: DestinationStateRead;
  /**
   * Encodes `document` as the state file (validated, no larger than the destination's bound)
   * without writing anything: a state that cannot be written is refused before the journal.
   */
  prepare(document: StateDocument): PreparedState;
  /**
   * Records in the lease what the change will delete after its commit, with the version each of
   * those paths holds now (their deletes are fenced on it). From here on a failure of the body
   * leaves the lease abandoned with what is still pending, for the next run's recovery.
   */
  journal(entry: TransactionJournal): Promise<void>;
  /**
   * Confirms the lease, then writes `next` as the state by compare-and-swap on the version read
   * (or the one the last commit wrote); where no state was, only where none is yet. A failure is
   * resolved by reading back: another state there is a `StateChangedError`, an outcome that
   * stays unknown an `AmbiguousCommitError`.
   */
  commit(next: StateDocument | PreparedState): Promise<void>;
  /**
   * After a commit, deletes the journaled paths not deleted yet, one at a time, each fenced on its
   * journaled version; a path rewritten since is deleted at its new version only while the lease
   * is proven held. Resolves with the paths left in place (rewritten, lease not proven); a failure
   * throws a `PendingDeletesError` listing what is left.
   */
  deleteAfter(options?: DeleteAfterOptions): Promise<string[]>;
  /**
   * Deletes the state file (fenced on the version this transaction holds), or notes that none is
   * stored: the bundle path ends without a state, and releasing the lease removes the directories
   * it leaves empty.
   */
  removeState(): Promise<void>;
}

/**
 * Runs `body` as one change of the state at `bundlePath`: takes the lease (recovering a stale one
 * first, waiting up to `lockTimeoutMs` for a live one), reads the state, and lets the body journal,
 * commit and delete through the transaction. The lease is released when the body returns, and when
 * it fails before journaling anything; a failure after its journal abandons the lease with the
 * journaled deletes not yet done, so the next run at this bundle path finishes or undoes them. A
 * dry run reads the state without a lease.
 */
export async function withStateTransaction<Result>(
  destination: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  options: StateTransactionOptions,
  body: (tx: StateTransaction) => Promise<Result>,
): Promise<Result> {
  const limits = options.limits ?? DEFAULT_DESTINATION_LIMITS;
  const read = () =>
    readDestinationStatus(destination, bundlePath, options.signal, limits.stateBytes);
  if (options.dryRun ?? false) {
    return body(new Transaction(destination, bundlePath, await read(), undefined, options));
  }
  const lease = await holdLease(destination, bundlePath, owner, {
    ...options.lease,
    signal: options.signal,
    limits,
  });
  let tx: Transaction | undefined;
  let failed = false;
  try {
    tx = new Transaction(destination, bundlePath, await read(), lease, options);
    return await body(tx);
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    if (failed && tx?.journaled) await lease.abandon(tx.pending);
    else await lease.release({ pruneEmptyDirs: tx?.emptied ?? false });
  }
}

class Transaction implements StateTransaction {
  readonly bundlePath: string;
  readonly dryRun: boolean;
  readonly read: DestinationStateRead;
  readonly #destination: StorageBackend;
  readonly #lease: Lease | undefined;
  readonly #signal: AbortSignal | undefined;
  readonly #limits: DestinationLimits;
  /** The version the next commit swaps: the one read, then the one each commit wrote. */
  #version: string | undefined;
  /** Journaled deletes in journal order, with the versions they are fenced on. */
  readonly #deletes = new Map<string, StoredVersion>();
  readonly #deleted = new Set<string>();
  #journaled = false;
  #committed = false;
  #emptied = false;

  constructor(
    destination: StorageBackend,
    bundlePath: string,
    read: DestinationStateRead,
    lease: Lease | undefined,
    options: StateTransactionOptions,
  ) {
    this.#destination = destination;
    this.bundlePath = bundlePath;
    this.read = read;
    this.dryRun = lease === undefined;
    this.#lease = lease;
    this.#signal = options.signal;
    this.#limits = options.limits ?? DEFAULT_DESTINATION_LIMITS;
    this.#version = read.version;
  }

  /** Whether anything was journaled: a failure from here on abandons the lease. */
  get journaled(): boolean {
    return this.#journaled;
  }

  /** Journaled deletes not done yet: what an abandoned lease keeps for the next run. */
  get pending(): string[] {
    return [...this.#deletes.keys()].filter((path) => !this.#deleted.has(path));
  }

  /** The state was removed (or none was there): the lease's release prunes empty directories. */
  get emptied(): boolean {
    return this.#emptied;
  }

  prepare(document: StateDocument): PreparedState {
    const path = statePath(this.bundlePath);
    const bytes = encodeStateFile(this.#destination, path, document, this.#limits.stateBytes);
    return { document, bytes };
  }

  async journal(entry: TransactionJournal): Promise<void> {
    const lease = this.#held("journal");
    const deletes = (entry.deletes ?? []).filter((path) => !this.#deletes.has(path));
    // Read before the journal: a path that changes after it is not the one this change deletes.
    const versions = await storedVersions(
      this.#destination,
      this.bundlePath,
      deletes,
      this.#signal,
    );
    await lease.journal(deletes, entry.directories ?? []);
    for (const [path, version] of versions) this.#deletes.set(path, version);
    this.#journaled = true;
  }

  async commit(next: StateDocument | PreparedState): Promise<void> {
    const lease = this.#held("commit");
    const { bytes } = "bytes" in next ? next : this.prepare(next);
    this.#signal?.throwIfAborted();
    // Step confirm: a run that stalled past its lease learns it here, before it commits.
    await lease.confirm();
    const path = statePath(this.bundlePath);
    this.#version = await compareAndSwapState(
      this.#destination,
      path,
      bytes,
      this.#version,
      this.#signal,
    );
    this.#committed = true;
  }

  async deleteAfter(options: DeleteAfterOptions = {}): Promise<string[]> {
    const lease = this.#held("delete");
    if (!this.#committed) {
      throw new Error(
        `the deletes of ${this.#where} come after its commit: nothing was committed yet`,
      );
    }
    const failure = (path: string, error: unknown) => {
      const message =
        options.failureMessage?.(path, error) ??
        `the state of ${this.#where} is committed, but ${this.#signal?.aborted ? "the deletes were interrupted" : `deleting ${path} failed`}: ${(error as Error)?.message ?? String(error)}; the next run there removes the rest`;
      return new PendingDeletesError(message, this.pending, { cause: error });
    };
    return deleteFenced(
      this.#destination,
      lease,
      this.bundlePath,
      this.pending,
      this.#deletes,
      this.#signal,
      failure,
      (path) => {
        this.#deleted.add(path);
        options.onDeleted?.(path);
      },
    );
  }

  async removeState(): Promise<void> {
    const lease = this.#held("remove the state");
    if (this.#version !== undefined) {
      this.#signal?.throwIfAborted();
      await lease.confirm();
      await this.#destination.deletePaths(this.bundlePath, [STATE_FILE_NAME], {
        ignoreMissing: true,
        pruneEmptyDirs: true,
        ifMatch: new Map([[STATE_FILE_NAME, this.#version]]),
        signal: this.#signal,
      });
      this.#version = undefined;
    }
    this.#emptied = true;
  }

  get #where(): string {
    return locatePath(this.#destination.location, this.bundlePath === "" ? "." : this.bundlePath);
  }

  #held(what: string): Lease {
    if (this.#lease === undefined) {
      throw new Error(`a dry run of ${this.#where} cannot ${what}: it holds no lease`);
    }
    return this.#lease;
  }
}
