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
