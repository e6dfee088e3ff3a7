import { type Manifest, parseManifest, serializeManifest } from "@distributor/bundle";
import { errorMessage, StateError } from "./errors.js";

/**
 * State documents embed the source manifest (`source.manifest`) under the bundle contract: the
 * bundle package's strict parser decides what is valid, so both files follow one set of rules.
 */
export function parseEmbeddedManifest(value: unknown, name: string): Manifest {
  try {
    return parseManifest(JSON.stringify(value));
  } catch (error) {
    throw new StateError(`${name}: ${errorMessage(error)}`, { cause: error });
  }
}

/** The manifest as the JSON value embedded in a state document. */
export function embeddedManifestJson(manifest: Manifest): unknown {
  return JSON.parse(serializeManifest(manifest));
}

/** Why an in-memory manifest would not survive being written and read back, or undefined. */
export function embeddedManifestProblem(manifest: Manifest): string | undefined {
  try {
    parseManifest(serializeManifest(manifest));
    return undefined;
  } catch (error) {
    return errorMessage(error);
  }
}

/** Same schema, id, creation instant, digest and file list. */
export function manifestsEqual(a: Manifest, b: Manifest): boolean {
  if (a.schemaVersion !== b.schemaVersion || a.id !== b.id || a.digest !== b.digest) return false;
  if (a.created.getTime() !== b.created.getTime()) return false;
  if (a.files.length !== b.files.length) return false;
  return a.files.every((file, index) => {
    const other = b.files[index];
    return (
      other !== undefined &&
      file.path === other.path &&
      file.sha256 === other.sha256 &&
      file.size === other.size
    );
  });
}
