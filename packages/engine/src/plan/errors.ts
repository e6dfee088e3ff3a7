/** A publication that cannot be planned: output collisions, invalid transform selection. */
export class PublishPlanError extends Error {
  override readonly name = "PublishPlanError";
}

/**
 * A bundle path stored in one layout and configured with the other (`layout: releases` against
 * files published in place, or back): every command refuses it with `unsupported_layout`.
 */
export class LayoutMismatchError extends Error {
  override readonly name = "LayoutMismatchError";
  readonly code = "unsupported_layout";
}

/**
 * The refusal of a bundle path stored in layout `stored` while the destination is configured
 * with the other, with the way forward: every command gives this one.
 */
export function layoutMismatch(
  where: string,
  stored: "in_place" | "releases",
): LayoutMismatchError {
  return new LayoutMismatchError(
    stored === "releases"
      ? `${where} was published with layout: releases, and the destination's configuration now has the default layout; set layout: releases again (or publish to another bundle path)`
      : `${where} was published in place (the default layout), and the destination's configuration now has layout: releases; a release layout does not take over files published in place — remove layout: releases again, or publish to a new bundle path (or destination) with it`,
  );
}
