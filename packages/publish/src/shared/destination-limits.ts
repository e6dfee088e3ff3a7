import type { DestinationLimits } from "@distributor/engine";
import type { DestinationConfig } from "../config/types.js";

/**
 * A destination's `max_state_size` and `max_entries` as the engine takes them, each naming its
 * setting, so that what they refuse says what to raise.
 */
export function destinationLimits(
  pipelineId: string,
  destination: Pick<DestinationConfig, "id" | "maxStateSize" | "maxEntries">,
): DestinationLimits {
  const owner = `destination "${destination.id}" in pipeline "${pipelineId}"`;
  return {
    stateBytes: {
      value: destination.maxStateSize,
      setting: { key: "destinations[].max_state_size", owner },
    },
    entries: {
      value: destination.maxEntries,
      setting: { key: "destinations[].max_entries", owner },
    },
  };
}
