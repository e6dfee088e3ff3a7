import { type FaultPlan, faultyBackend, isPowerCut } from "@distributor/engine/testing";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import {
  createMemoryDiskBackend,
  type MemoryFsDriver,
  memoryDisk,
  readDirectoryImage,
  writeDirectoryImage,
} from "@distributor/storage/testing";
import type { BackendRegistry } from "../../src/backends/registry.js";

/** A backend method, as `wrappingDestination` hands it over (bound to its backend). */
export type BackendCall = (...args: never[]) => Promise<unknown>;

/**
 * A registry of real local backends in which the one rooted at `dest` has each method replaced
 * by what `wrap` makes of it (given the method's name and the bound original): how tests slip
 * something in between a run's steps, or watch them, on the real filesystem.
 */
export function wrappingDestination(
  dest: string,
  wrap: (name: string, call: BackendCall) => BackendCall,
): BackendRegistry {
  return {
    local: async (location) => {
      const backend = createLocalBackend({ root: location.path });
      if (location.path !== dest) return backend;
      return new Proxy(backend, {
        get(target, property) {
          const value = Reflect.get(target, property, target);
          if (typeof value !== "function") return value;
          return wrap(String(property), value.bind(target) as BackendCall);
        },
      });
    },
  };
}

/** `wrappingDestination` for `writeFile` alone: `around(path, write)` performs each write. */
export function aroundWrites(
  dest: string,
  around: (path: string, write: () => Promise<unknown>) => Promise<unknown>,
): BackendRegistry {
  return wrappingDestination(dest, (name, call) => {
    if (name !== "writeFile") return call;
    const write = call as (...args: unknown[]) => Promise<unknown>;
    return ((path: string, data: unknown, options: unknown) =>
      around(path, () => write(path, data, options))) as BackendCall;
  });
}

export type EngineBackend = "memory" | "local";

/**
 * A local destination on an in-memory disk, across the commands of one case: loaded from the
 * real directory by the first, replaced by what survives each power cut.
 */
export interface MemoryDiskHolder {
  driver?: MemoryFsDriver;
}

/**
 * A registry for `local` locations: sources on the real filesystem; the destination at `dest` on
 * the real filesystem too, or in a memory store, wrapped by `plan` when one is given. Under a
 * power cut of the local engine, the command runs on an in-memory disk (`disk`'s, or loaded
 * from `dest`), and what survives the cut is written back to `dest` (the machine came back) and
 * becomes `disk`'s. `cutPowerAfter(plan)` once the command returned cuts it then if it never came.
 */
export function registryFor(
  engine: EngineBackend,
  memory: (path: string) => StorageBackend,
  dest: string,
  plan?: FaultPlan,
  disk: MemoryDiskHolder = {},
): BackendRegistry {
  let loaded: Promise<MemoryFsDriver> | undefined;
  const onDisk = (faulted: FaultPlan | undefined) => {
    loaded ??= (async () => {
      const driver = disk.driver ?? memoryDisk(await readDirectoryImage(dest));
      disk.driver = driver;
      if (faulted !== undefined) {
        faulted.powerCut = async (order) => {
          disk.driver = driver.powerCut(order);
          await writeDirectoryImage(dest, disk.driver.image());
        };
      }
      return driver;
    })();
    return loaded;
  };
  return {
    local: async (location) => {
      if (location.path !== dest) return createLocalBackend({ root: location.path });
      const fsync = location.fsync === undefined ? {} : { fsync: location.fsync };
      const cuts = plan !== undefined && isPowerCut(plan.kind);
      if (engine === "local" && (cuts || disk.driver !== undefined)) {
        const backend = createMemoryDiskBackend(await onDisk(plan), fsync);
        return plan === undefined ? backend : faultyBackend(backend, plan);
      }
      const backend =
        engine === "memory" ? memory(dest) : createLocalBackend({ root: dest, ...fsync });
      return plan === undefined ? backend : faultyBackend(backend, plan);
    },
    // A destination configured as s3 (for what only S3 offers, object metadata) is the memory
    // store of `dest`, which keeps metadata per object as S3 does.
    s3: async () => {
      if (engine !== "memory") throw new Error("an s3 destination runs on the memory engine only");
      const backend = memory(dest);
      return plan === undefined ? backend : faultyBackend(backend, plan);
    },
  };
}
