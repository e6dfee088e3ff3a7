import { compareLogicalPaths } from "@distributor/storage";
import type { Manifest } from "./manifest-types.js";

export interface SelectableBundle {
  /** Root-relative bundle path. */
  path: string;
  manifest: Pick<Manifest, "created">;
}

/**
 * The bundle a `fixed` destination publishes (docs/design/bundles.md): the newest manifest `created`; equal
 * times go to the smallest root-relative path in byte order. Undefined when there are none.
 */
export function selectNewestBundle<T extends SelectableBundle>(
  bundles: readonly T[],
): T | undefined {
  let selected: T | undefined;
  for (const bundle of bundles) {
    if (selected === undefined) {
      selected = bundle;
      continue;
    }
    const newer = bundle.manifest.created.getTime() - selected.manifest.created.getTime();
    if (newer > 0 || (newer === 0 && compareLogicalPaths(bundle.path, selected.path) < 0)) {
      selected = bundle;
    }
  }
  return selected;
}
