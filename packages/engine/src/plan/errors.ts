/** A publication that cannot be planned: output collisions, invalid transform selection. */
export class PublishPlanError extends Error {
  override readonly name = "PublishPlanError";
}
