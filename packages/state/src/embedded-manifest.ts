import {
  frozenManifestFromJsonSteps,
  type Manifest,
  parseManifest,
  serializeManifest,
  verifiedManifestText,
} from "@distributor/bundle";
import { errorMessage, StateError } from "./errors.js";
import { parsedManifest } from "./known-valid.js";
import { runSteps, type Steps } from "./steps.js";

/**
 * State documents embed the source manifest (`source.manifest`) under the bundle contract: the
 * bundle package's strict parser decides what is valid, so both files follow one set of rules.
 */
export function parseEmbeddedManifest(value: unknown, name: string): Manifest {
  return runSteps(parseEmbeddedManifestSteps(value, name));
}

/** `parseEmbeddedManifest` as steps that pause every few files (a big state's manifest). */
export function* parseEmbeddedManifestSteps(
  value: unknown,
  name: string,
  shared?: Manifest,
): Steps<Manifest> {
  try {
    // Frozen: a state's manifest is only read, and so it is known valid as long as it is held.
    return parsedManifest(yield* frozenManifestFromJsonSteps(value, undefined, shared));
  } catch (error) {
    throw new StateError(`${name}: ${errorMessage(error)}`, { cause: error });
  }
}

/**
 * The manifest's canonical text, checked to survive being written and read back, or why it would
 * not. The state serialiser embeds this text, so what is written is exactly what was checked.
 */
export function checkedManifestText(
  manifest: Manifest,
): { ok: true; text: string } | { ok: false; problem: string } {
  // Parsed by the bundle package and unchanged since: valid, no need to read it again.
  const known = verifiedManifestText(manifest);
  if (known !== undefined) return { ok: true, text: known };
  try {
    const text = serializeManifest(manifest);
    parseManifest(text);
    return { ok: true, text };
  } catch (error) {
    return { ok: false, problem: errorMessage(error) };
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
