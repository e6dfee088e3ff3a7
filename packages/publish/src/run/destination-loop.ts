import type { StorageBackend } from "@distributor/storage";
import { openBackend } from "../backends/registry.js";
import type { DestinationConfig } from "../config/types.js";
import type { RunActionReport, RunOptions } from "./types.js";

/** What one destination's loop does with each of its targets. */
export interface DestinationSteps<Target> {
  /** Carries out one target on the opened destination; undefined when it reported nothing. */
  run(backend: StorageBackend, target: Target): Promise<RunActionReport | undefined>;
  /** The failed action of a target the destination could not be opened for. */
  failed(target: Target, error: unknown): RunActionReport;
}

/**
 * The destination loop `run` and `apply` share: opens the destination once, carries out its
 * targets one after another, records each action (the report and the `destination_done` event)
 * and closes the destination. A destination that cannot be opened fails every target with that
 * error. Nothing more starts once `options.signal` is aborted; the caller decides whether that
 * ends the run.
 */
export async function eachTarget<Target>(
  options: RunOptions,
  destination: DestinationConfig,
  targets: readonly Target[],
  actions: RunActionReport[],
  steps: DestinationSteps<Target>,
): Promise<void> {
  const record = (action: RunActionReport) => {
    actions.push(action);
    options.onEvent?.({ type: "destination_done", action });
  };
  let backend: StorageBackend;
  try {
    backend = await openBackend(options.backends, destination.location, {
      role: "destination",
      dryRun: options.dryRun ?? false,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    for (const target of targets) {
      record(steps.failed(target, error));
      if (options.signal?.aborted) break;
    }
    return;
  }
  try {
    for (const target of targets) {
      const action = await steps.run(backend, target);
      if (action !== undefined) record(action);
      // Interrupted: the action in progress is reported failed, and nothing more starts.
      if (options.signal?.aborted) break;
    }
  } finally {
    // Fan-out: a destination that fails to close must not stop the pipeline's other destinations.
    await backend.close().catch(() => undefined);
  }
}
