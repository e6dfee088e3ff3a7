import { afterEach, beforeEach, describe } from "vitest";
import type { StorageBackend } from "../backend.js";
import { describeCancellation } from "./contract/cancellation.js";
import { type BackendCapabilities, type ContractContext, summarize } from "./contract/context.js";
import { describeDeletes } from "./contract/deletes.js";
import { describeLinks } from "./contract/links.js";
import { describeListing } from "./contract/listing.js";
import { describeObjectMetadata } from "./contract/metadata.js";
import { describeInvalidPaths } from "./contract/paths.js";
import { describeReadWrite } from "./contract/read-write.js";
import { describeVersions } from "./contract/versions.js";

/** A fresh, empty backend for one test, and how to dispose of what it used. */
export interface BackendFixture {
  backend: StorageBackend;
  /** Runs after `backend.close()`, e.g. to remove a temp directory or stop a server. */
  cleanup?: () => Promise<void>;
}

export type BackendFactory = () => Promise<BackendFixture> | BackendFixture;

export type { BackendCapabilities, ContractContext } from "./contract/context.js";

/**
 * Registers the behaviour every `StorageBackend` must share as vitest tests. Call it at the top
 * level of a test file; `factory` runs before each test and must return an empty backend. The
 * groups, one file each under `contract/`, say what each capability demands: reading and
 * writing, versions and conditional writes, object metadata, listing, deletes, invalid paths,
 * cancellation, links.
 */
export function describeBackendContract(
  name: string,
  factory: BackendFactory,
  capabilities: BackendCapabilities = {},
): void {
  describe(`${name} backend contract`, () => {
    let fixture: BackendFixture | undefined;
    const backend = (): StorageBackend => {
      if (!fixture) throw new Error("the backend fixture is not ready");
      return fixture.backend;
    };

    beforeEach(async () => {
      fixture = await factory();
    });

    afterEach(async () => {
      const current = fixture;
      fixture = undefined;
      if (!current) return;
      try {
        await current.backend.close();
      } finally {
        await current.cleanup?.();
      }
    });

    const contract: ContractContext = {
      backend,
      capabilities,
      put: async (files) => {
        for (const [path, text] of Object.entries(files)) await backend().writeFile(path, text);
      },
      readText: async (path) => Buffer.from(await backend().readFile(path)).toString("utf8"),
      tree: async (prefix = "") =>
        summarize(await backend().walk(prefix, { recursive: true, limit: 1000 })),
      files: async () =>
        (await backend().walk("", { recursive: true, limit: 1000 }))
          .filter((entry) => entry.kind === "file")
          .map((entry) => entry.path),
    };

    describeReadWrite(contract);
    describeVersions(contract);
    describeObjectMetadata(contract);
    describeListing(contract);
    describeDeletes(contract);
    describeInvalidPaths(contract);
    describeCancellation(contract);
    describeLinks(contract);
  });
}

export { describeCancellation } from "./contract/cancellation.js";
export { expectStorageError } from "./contract/context.js";
export { describeDeletes } from "./contract/deletes.js";
export { describeListing } from "./contract/listing.js";
export { describeInvalidPaths } from "./contract/paths.js";
export { describeReadWrite } from "./contract/read-write.js";
export { describeVersions } from "./contract/versions.js";
export { readDirectoryImage, writeDirectoryImage } from "./disk-image.js";
export { createFlushWatchedLocalBackend, type LocalFlush } from "./flush-watch.js";
export type { ProxiedRequest, ProxiedRequestHead } from "./http-framing.js";
export {
  copyImage,
  imageDirectory,
  loopMountUnavailable,
  makeExt4Image,
  mountImage,
  unmountAll,
  unmountImage,
} from "./loop-image.js";
export { createMemoryDiskBackend, memoryDisk } from "./memory-fs-backend.js";
export {
  type FsImageEntry,
  MemoryFsDriver,
  type MemoryFsDriverOptions,
  type PowerCutOrder,
} from "./memory-fs-driver.js";
export {
  type RequestMatch,
  startTcpProxy,
  type TcpProxy,
  type TcpProxyOptions,
  type TimedRequest,
} from "./tcp-proxy.js";

/**
 * Extra runs of each fault case that depends on timing, from `DISTRIBUTOR_FAULT_REPEATS` (the
 * whole count; unset or 1 means once): vitest's `repeats` option. `scripts/repeat-fault-tests.sh`
 * sets it to show a window is closed, not merely unlikely; `pnpm test` runs each case once.
 */
export function faultRepeats(): number {
  const raw = process.env.DISTRIBUTOR_FAULT_REPEATS;
  if (raw === undefined || raw === "") return 0;
  const count = Number(raw);
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`DISTRIBUTOR_FAULT_REPEATS must be a whole number ≥ 1, got "${raw}"`);
  }
  return count - 1;
}
