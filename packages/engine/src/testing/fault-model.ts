import { createHash } from "node:crypto";
import {
  isSharedRootState,
  ownerOutputs,
  parseDocument,
  type StateDocument,
} from "@distributor/state";
import {
  createMemoryBackend,
  isTempFileName,
  LEASE_FILE_NAME,
  STATE_FILE_NAME,
  type StorageBackend,
  StorageError,
} from "@distributor/storage";
import type { PowerCutOrder } from "@distributor/storage/testing";
import { expect } from "vitest";

/**
 * The fault model of docs/design/commit-protocol.md (and CONVENTIONS "fault models name every outcome"): what can
 * happen to one mutation of a destination backend.
 * - `fail`: refused before anything was done (the store answered with an error).
 * - `crash`: the process died there: nothing more of this run happens, not even its cleanup.
 * - `lost_answer`: the store did it, but the answer was lost (a reset after the request).
 * - `hang`: the store did it and never answered; the request times out (a backend's request
 *   timeout, or the run's interrupt) and the caller sees a timeout.
 * - `stall`: the process stalls before the mutation, past its lease, while another run takes
 *   the lease over and commits; then the mutation goes ahead as if nothing happened.
 * - `blackout`: a lost answer after which the store stays unreachable for reads until the next
 *   mutation, so reading back cannot resolve it either (a network partition right after the
 *   request landed).
 * - `power_cut`: the mutation is done, then the power fails: the process is gone, and the disk
 *   keeps only what was flushed (file data as of its last fsync, each directory's names as of
 *   its last fsync) — docs/design/power-loss.md.
 * - `power_cut_names_first`: the same, but every name operation reached the disk and only file
 *   data that was not flushed is lost: a name may point to bytes that never landed.
 * A power cut needs a disk that can forget (`FaultPlan.powerCut`); a store without one (S3, which
 * acknowledges only what it keeps) loses nothing but the process: the mutation landed, then the
 * process died before hearing so.
 */
export const FAULT_KINDS = [
  "fail",
  "crash",
  "lost_answer",
  "hang",
  "stall",
  "blackout",
  "power_cut",
  "power_cut_names_first",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

const POWER_CUT_ORDERS = {
  power_cut: "flushed_only",
  power_cut_names_first: "names_first",
} as const satisfies Partial<Record<FaultKind, PowerCutOrder>>;

/**
 * The fault kinds a suite iterates: every one, or those `DISTRIBUTOR_FAULT_KINDS` names
 * (comma-separated), to run one kind's cases alone while working on it.
 */
export function faultKinds(): readonly FaultKind[] {
  const raw = process.env.DISTRIBUTOR_FAULT_KINDS;
  if (raw === undefined || raw === "") return FAULT_KINDS;
  const names = raw.split(",").map((name) => name.trim());
  const unknown = names.filter((name) => !(FAULT_KINDS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new RangeError(
      `DISTRIBUTOR_FAULT_KINDS names unknown kinds ${unknown.join(", ")}; known: ${FAULT_KINDS.join(", ")}`,
    );
  }
  return FAULT_KINDS.filter((kind) => names.includes(kind));
}

/** Whether `kind` cuts the power. */
export function isPowerCut(kind: FaultKind | "count"): kind is keyof typeof POWER_CUT_ORDERS {
  return kind in POWER_CUT_ORDERS;
}

/** Every method that changes what a backend stores (with those of its `links`). */
const MUTATIONS = new Set([
  "writeFile",
  "deletePaths",
  "deletePrefix",
  "abortUploads",
  "hardLink",
  "cloneFile",
  "switchLink",
]);

export class Crash extends Error {
  override readonly name = "Crash";
}

export interface FaultPlan {
  /** `count` injects nothing and only counts the mutations. */
  kind: FaultKind | "count";
  /** The 1-based mutation position the fault hits. */
  at: number;
  /** Mutations seen so far (shared by every backend of one run). */
  counter: { n: number };
  /** For `stall`: what happens while this run stalls (another run takes over and commits). */
  onStall?: () => Promise<void>;
  /** For `hang`: how long the store keeps the caller waiting before its timeout fires. */
  hangMs?: number;
  /** Receives the mutation and its position, e.g. to name a failing case. */
  seen?: (position: number, method: string, path: string) => void;
  /**
   * For the power cuts: makes the disk under the backend forget what was not flushed, in
   * `order`, as the machine finds it when it comes back. Set by whoever built that backend.
   */
  powerCut?: (order: PowerCutOrder) => Promise<void>;
  /** Set once the power failed. */
  cut?: boolean;
}

async function cutPower(plan: FaultPlan): Promise<void> {
  if (!isPowerCut(plan.kind) || plan.cut) return;
  plan.cut = true;
  await plan.powerCut?.(POWER_CUT_ORDERS[plan.kind]);
}

/**
 * Cuts the power of a power-cut plan whose position the command never reached: the command
 * returned (and reported), then the power failed. Does nothing for other plans, or once cut.
 */
export function cutPowerAfter(plan: FaultPlan): Promise<void> {
  return cutPower(plan);
}

function injected(method: string, path: string, detail: string): StorageError {
  return new StorageError({
    kind: "unavailable",
    operation: method === "writeFile" ? "write file" : "delete managed outputs",
    backend: "faulty",
    path,
    detail,
  });
}

/**
 * Wraps `inner` so that the `plan.at`-th mutation meets `plan.kind`. The link operations of
 * `inner.links` (a hard link, a clone, a switch of a symlink) count as mutations too.
 */
export function faultyBackend(inner: StorageBackend, plan: FaultPlan): StorageBackend {
  const run = { crashed: false, dark: false };
  return faultyObject(inner, plan, run) as StorageBackend;
}

function faultyObject(
  inner: object,
  plan: FaultPlan,
  run: { crashed: boolean; dark: boolean },
): object {
  return new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === "links" && typeof value === "object" && value !== null) {
        return faultyObject(value, plan, run);
      }
      if (typeof value !== "function") return value;
      const method = String(property);
      return async (...args: unknown[]) => {
        if (run.crashed) throw new Crash("the process is gone");
        const call = () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (!MUTATIONS.has(method) || property === "close") {
          if (run.dark && property !== "close") {
            throw injected(method, String(args[0]), "the store cannot be reached");
          }
          return call();
        }
        run.dark = false;
        plan.counter.n += 1;
        const position = plan.counter.n;
        const path = String(args[0]);
        plan.seen?.(position, method, path);
        if (plan.kind === "count" || position !== plan.at) return call();
        switch (plan.kind) {
          case "fail":
            throw injected(method, path, "injected failure before doing anything");
          case "crash": {
            run.crashed = true;
            if (method === "writeFile") {
              // Killed mid-write: a partial temp file stays beside the target.
              const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/") + 1) : "";
              await (target as StorageBackend).writeFile(
                `${dir}.distributor.0badc0ffee001234.tmp`,
                "partial",
                {
                  overwrite: true,
                },
              );
            }
            throw new Crash("killed");
          }
          case "lost_answer":
            await call();
            throw injected(method, path, "connection reset after the request was sent");
          case "blackout":
            await call();
            run.dark = true;
            throw injected(method, path, "connection reset after the request was sent");
          case "hang": {
            await call();
            const signal = signalOf(method, args);
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, plan.hangMs ?? 20);
              signal?.addEventListener(
                "abort",
                () => {
                  clearTimeout(timer);
                  resolve();
                },
                { once: true },
              );
            });
            if (signal?.aborted) throw signal.reason;
            throw injected(method, path, "request timed out without an answer");
          }
          case "stall":
            await plan.onStall?.();
            return call();
          case "power_cut":
          case "power_cut_names_first": {
            run.crashed = true;
            // Whatever the mutation answered, the process is gone before it hears.
            await call().catch(() => undefined);
            await cutPower(plan);
            throw new Crash("the power failed");
          }
        }
      };
    },
  });
}

function signalOf(method: string, args: unknown[]): AbortSignal | undefined {
  const third = ["writeFile", "deletePaths", "hardLink", "cloneFile", "switchLink"].includes(
    method,
  );
  const options = (third ? args[2] : args[1]) as { signal?: AbortSignal } | undefined;
  return options?.signal;
}

/** A memory backend that outlives the runs that open and close it, one per configured path. */
export function memoryStores(): (path: string) => StorageBackend {
  const stores = new Map<string, StorageBackend>();
  return (path) => {
    let store = stores.get(path);
    if (store === undefined) {
      const memory = createMemoryBackend();
      store = new Proxy(memory, {
        get(target, property) {
          if (property === "close") return async () => undefined;
          const value = Reflect.get(target, property, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      stores.set(path, store);
    }
    return store;
  };
}

const sha = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/**
 * Planned outputs = records, for the copy-only configurations of the fault suites: every owner
 * records each file of the source it records, at its path, with its bytes (before any encoding);
 * an owner that replaces records nothing else (one that merges may keep older bundles' outputs).
 */
export function expectWholePublication(
  state: StateDocument,
  label: string,
  pipelines?: readonly string[],
): void {
  const owners = isSharedRootState(state)
    ? state.owners.map((owner) => ({
        name: `${owner.scope.pipelineId}/${owner.scope.destinationId}`,
        manifest: owner.source.manifest,
        merge: owner.reconciliation.mode === "merge",
        records: ownerOutputs(state, owner.scope),
      }))
    : [
        {
          name: `${state.pipelineId}/${state.destinationId}`,
          manifest: state.source.manifest,
          merge: state.reconciliation.mode === "merge",
          records: state.outputs,
        },
      ];
  for (const owner of owners) {
    if (pipelines !== undefined && !pipelines.includes(owner.name.split("/")[0] as string))
      continue;
    const records = new Map(owner.records.map((record) => [record.path, record]));
    for (const file of owner.manifest.files) {
      const record = records.get(file.path);
      const where = `${label}: ${owner.name} records ${owner.manifest.id} but`;
      expect(record, `${where} not its ${file.path}`).toBeDefined();
      const bytes = record?.decoded ?? record;
      expect(bytes?.sha256, `${where} other bytes at ${file.path}`).toBe(file.sha256);
    }
    if (owner.merge) continue;
    const listed = new Set(owner.manifest.files.map((file) => file.path));
    const extra = owner.records.filter((record) => !listed.has(record.path));
    expect(
      extra.map((record) => record.path),
      `${label}: ${owner.name} records outputs ${owner.manifest.id} does not give`,
    ).toEqual([]);
  }
}

/**
 * The invariant after every fault (docs/design/commit-protocol.md): every state file — at the destination root, or one
 * per bundle path below it — describes exactly the bytes there. Every recorded output holds its
 * recorded digest and size; every other file is in `unmanaged` (untouched, with those bytes).
 * Every owner records the whole publication of its recorded source (`expectWholePublication`).
 * Without `debris`, no lease and no temp file lie anywhere either. Returns the recorded outputs
 * (path below the destination root → sha256).
 */
export async function expectAgreement(
  backend: StorageBackend,
  options: {
    unmanaged?: Record<string, string>;
    debris?: boolean;
    label?: string;
    /**
     * A lease expired by then may stay: a committed run whose release failed leaves one, and a
     * run that only skips reads the state alone, so it never sees it (the next write takes it
     * over). Its journal must name nothing left to undo, which the rest of the check shows.
     */
    staleLeasesAt?: Date;
    /** Records may fall short of the recorded source's publication (after reconcile-state). */
    partial?: boolean | undefined;
    /** Only these pipelines' owners must hold their whole publication (default: every owner). */
    wholeFor?: readonly string[] | undefined;
  } = {},
): Promise<Record<string, string>> {
  const label = options.label ?? "";
  const entries = await backend.walk("", { recursive: true, limit: 10_000 });
  const files = entries.filter((entry) => entry.kind === "file").map((entry) => entry.path);
  const nameOf = (path: string) => path.slice(path.lastIndexOf("/") + 1);
  const recorded: Record<string, string> = {};
  for (const stateFile of files.filter((path) => nameOf(path) === STATE_FILE_NAME)) {
    const bundle = stateFile.slice(0, stateFile.length - STATE_FILE_NAME.length);
    const state = parseDocument(Buffer.from(await backend.readFile(stateFile)).toString());
    if (!options.partial) expectWholePublication(state, `${label}: ${stateFile}`, options.wholeFor);
    for (const output of state.outputs) {
      const path = `${bundle}${output.path}`;
      expect(recorded[path], `${label}: ${path} is recorded by two states`).toBeUndefined();
      recorded[path] = output.sha256;
      expect(files, `${label}: recorded ${path} is missing`).toContain(path);
      const bytes = await backend.readFile(path);
      expect(sha(bytes), `${label}: ${path} holds other bytes than recorded`).toBe(output.sha256);
      expect(bytes.byteLength, `${label}: ${path} size`).toBe(output.size);
    }
  }
  for (const path of files) {
    const name = nameOf(path);
    if (name === STATE_FILE_NAME || recorded[path] !== undefined) continue;
    if (name === LEASE_FILE_NAME && options.staleLeasesAt !== undefined && !options.debris) {
      const lease = JSON.parse(Buffer.from(await backend.readFile(path)).toString());
      const expires = new Date(lease.expires_at).getTime();
      expect(expires, `${label}: live lease ${path} left behind`).toBeLessThan(
        options.staleLeasesAt.getTime(),
      );
      continue;
    }
    if (name === LEASE_FILE_NAME || isTempFileName(name)) {
      expect(options.debris ?? false, `${label}: debris ${path} left behind`).toBe(true);
      continue;
    }
    const expected = options.unmanaged?.[path];
    expect(expected, `${label}: ${path} is recorded by no state`).toBeDefined();
    expect(
      Buffer.from(await backend.readFile(path)).toString(),
      `${label}: unmanaged ${path}`,
    ).toBe(expected);
  }
  if (!(options.debris ?? false)) {
    const directories = entries.filter((entry) => entry.kind === "directory");
    for (const directory of directories) {
      const below = files.some((file) => file.startsWith(`${directory.path}/`));
      expect(below, `${label}: empty directory ${directory.path} left behind`).toBe(true);
    }
  }
  return recorded;
}
