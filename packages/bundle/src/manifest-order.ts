import { compareLogicalPaths, type Steps } from "@distributor/storage";
import type { ManifestFile } from "./manifest-types.js";

// The canonical order of a manifest's files, and the pace of the steps that walk them.

/** Files handled between two pauses of the manifest's steps. */
export const STEP_FILES = 1000;

/** Whether `files` are in canonical order (by path, in UTF-8 byte order), checked in steps. */
export function* isSortedSteps(files: readonly ManifestFile[]): Steps<boolean> {
  for (let index = 1; index < files.length; index++) {
    if (compareLogicalPaths(files[index - 1]?.path ?? "", files[index]?.path ?? "") > 0) {
      return false;
    }
    if (index % STEP_FILES === 0) yield;
  }
  return true;
}
