import { createLocalBackend } from "@distributor/storage";
import { type ValidateBundleOptions, type ValidatedBundle, validateBundle } from "./validate.js";

/**
 * `validateBundle` for a bundle that is a local directory, as a producer holds it before packing:
 * the directory is the root of a local backend, so the same rules apply as on a source.
 */
export function validateBundleDirectory(
  directory: string,
  options: ValidateBundleOptions = {},
): Promise<ValidatedBundle> {
  return validateBundle(createLocalBackend({ root: directory }), "", options);
}
