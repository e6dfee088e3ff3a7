import type { BackendRegistry } from "../backends/registry.js";

/** Options every workflow accepts (docs/consumers/library.md). */
export interface WorkflowOptions<Event = never> {
  /** Backend factories by name, added to (and overriding) the default `local`. */
  backends?: BackendRegistry;
  signal?: AbortSignal;
  /** Progress events, for displays; workflows never depend on what the listener does. */
  onEvent?: (event: Event) => void;
  /** Clock, for reproducible reports and tests. */
  now?: () => Date;
}
