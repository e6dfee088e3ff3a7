import { StorageError } from "@distributor/storage";
import type { StorageLocation } from "../config/types.js";
import { type BackendRegistry, describeLocation } from "./registry.js";

/**
 * The remote backends of a configuration, for programs that use this package directly: `s3`
 * opens through `@distributor/storage-s3` and `ssh` through `@distributor/storage-ssh`, each
 * imported the first time a location of its kind is opened. Both adapters are optional peer
 * dependencies: install the ones your configuration names. `local` stays built in.
 *
 * ```ts
 * await run({ config, backends: remoteBackends() });
 * ```
 */
export function remoteBackends(): BackendRegistry {
  return {
    s3: async (location, options) => {
      const { openS3Location } = await loadAdapter(
        "@distributor/storage-s3",
        location,
        () => import("@distributor/storage-s3"),
      );
      return openS3Location(location, options);
    },
    ssh: async (location, options) => {
      const { openSshLocation } = await loadAdapter(
        "@distributor/storage-ssh",
        location,
        () => import("@distributor/storage-ssh"),
      );
      return openSshLocation(location, options);
    },
  };
}

/**
 * Imports an adapter package; when it is not installed, fails with a storage error of kind
 * `unsupported` that names the package to install, instead of Node's resolution message.
 */
export async function loadAdapter<Module>(
  packageName: string,
  location: StorageLocation,
  load: () => Promise<Module>,
): Promise<Module> {
  try {
    return await load();
  } catch (error) {
    if (!isMissingPackage(error, packageName)) throw error;
    throw new StorageError({
      kind: "unsupported",
      operation: "open backend",
      backend: location.backend,
      path: describeLocation(location),
      detail: `the ${location.backend} backend needs the package ${packageName}, which is not installed (npm install ${packageName})`,
      cause: error,
    });
  }
}

function isMissingPackage(error: unknown, packageName: string): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message : "";
  // Node names the package it could not find; a missing dependency *of* the adapter is a
  // different failure and keeps its own message.
  return (
    (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") &&
    (message.includes(`'${packageName}'`) || message.includes(`"${packageName}"`))
  );
}
