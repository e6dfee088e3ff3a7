import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import {
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";

import { type DestinationLimits, MAX_READABLE_STATE_BYTES, stateLimitText } from "./limits.js";

// The lease file: its format, what a reader reports of it, and when it is stale.

/** How long a lease lives unless renewed; renewals happen every third of it. */
export const DEFAULT_LEASE_TTL_MS = 60_000;

/** Pause between looks at a live lease while waiting for it. */
export const WAIT_INTERVAL_MS = 200;

/**
 * The largest lease a journal may make when no bound is set: 16 MiB, about 200 000 journaled
 * paths. A destination raises it with its `max_state_size` (`journalBytesLimit`).
 */
export const LEASE_BYTES_LIMIT = 16 * 1024 * 1024;

/**
 * How much of a lease file is read back: as much as any writer's bound allows, that is the
 * longest text Node.js holds (a journaled lease never exceeds its writer's `max_state_size`, which
 * never exceeds this). A reader that does not know the writer's setting must still read its lease,
 * or a big publication's journal could never be recovered.
 */
export const LEASE_READ_LIMIT = MAX_READABLE_STATE_BYTES;

/**
 * The largest lease a journal may make at a destination: its state's bound (the journal lists at
 * most the outputs a publication writes and the ones it deletes, which its states record), never
 * below `LEASE_BYTES_LIMIT`; room is left for a takeover's rewrite.
 */
export function journalBytesLimit(limits: DestinationLimits | undefined): {
  bytes: number;
  /** Where the bound comes from, when a setting raises it: for the refusal's message. */
  setting: string | undefined;
} {
  const state = limits?.stateBytes;
  const bound = Math.max(LEASE_BYTES_LIMIT, Math.min(state?.value ?? 0, LEASE_READ_LIMIT));
  return {
    bytes: bound - TAKEOVER_HEADROOM_BYTES,
    setting:
      state?.setting === undefined
        ? undefined
        : `the larger of 16 MiB and ${stateLimitText(state)}`,
  };
}

export const LEASE_FORMAT = "distributor-lease/1";

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
  /**
   * The destination's bounds on state bytes and listings (default `DEFAULT_DESTINATION_LIMITS`):
   * its state's bound is also its journal's (`journalBytesLimit`).
   */
  limits?: DestinationLimits | undefined;
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

export function isZombie(pid: number): boolean {
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

export function serializeLease(document: LeaseDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
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
      maxBytes: LEASE_READ_LIMIT,
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
      maxBytes: LEASE_READ_LIMIT,
      signal,
    });
    const lease = parseLease(Buffer.from(bytes).toString("utf8"));
    return lease === undefined ? undefined : leaseReport(lease);
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
}

/**
 * Room a journaled lease leaves below `LEASE_BYTES_LIMIT` for what a takeover rewrites: the new
 * holder's owner ids (up to 128 characters each), host name, pid and run id. A takeover is never
 * refused for its size, since a stale lease must always be recoverable; this room makes sure the
 * lease it writes can still be read back.
 */
export const TAKEOVER_HEADROOM_BYTES = 4096;
