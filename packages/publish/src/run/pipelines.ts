// The selected pipelines of a run, one after another; `run` and `planRun` both start here.
import { setImmediate as nextTurn } from "node:timers/promises";
import { selectNewestBundle } from "@distributor/bundle";
import { RenderCache } from "@distributor/engine";
import { findPipeline, sourceLocation } from "../backends/configured-location.js";
import { openBackend } from "../backends/registry.js";
import type { Config, PipelineConfig } from "../config/types.js";
import { errorCode, errorMessage, WorkflowError } from "../errors.js";
import {
  checkPortableNames,
  readPipelineManifests,
  validatePipelineBundles,
} from "./source-bundles.js";
import { type DestinationContext, runDestination } from "./target.js";
import type { RunHooks, RunOptions, RunReport } from "./types.js";

/** `run` with hooks for the workflows built on it (saved plans). */
export async function runWith(options: RunOptions, hooks: RunHooks): Promise<RunReport> {
  const report: RunReport = {
    dry_run: options.dryRun ?? false,
    actions: [],
    pipeline_errors: [],
    warnings: [],
    interrupted: false,
  };
  const selected = selectPipelines(
    options.config,
    options.pipelineIds ?? [],
    options.sources,
    options.repair ?? false,
  );
  for (const pipeline of selected) {
    if (options.signal?.aborted) {
      report.interrupted = true;
      break;
    }
    options.onEvent?.({ type: "pipeline_start", pipeline_id: pipeline.id });
    const recorded = report.actions.length;
    try {
      await runPipeline(options, pipeline, report, hooks);
    } catch (error) {
      const interrupted = options.signal?.aborted ?? false;
      // Interrupted part-way through its destinations: the failed action says so already.
      if (interrupted && report.actions.length > recorded) {
        report.interrupted = true;
        break;
      }
      const failure = {
        pipeline_id: pipeline.id,
        code: interrupted ? "aborted" : errorCode(error),
        message: errorMessage(interrupted ? (options.signal?.reason ?? error) : error),
      };
      report.pipeline_errors.push(failure);
      options.onEvent?.({ type: "pipeline_error", error: failure });
      if (interrupted) {
        report.interrupted = true;
        break;
      }
    }
  }
  return report;
}

function selectPipelines(
  config: Config,
  ids: readonly string[],
  sources: RunOptions["sources"],
  repair: boolean,
): PipelineConfig[] {
  // An uploaded bundle is gone once its run ends: nothing here can republish its outputs.
  const restore = repair
    ? "; its source is gone once its run ends, so --repair cannot restore its outputs: upload the bundle again (distributor upload), and the server's run writes back what is missing"
    : "";
  if (ids.length === 0) {
    const runnable = config.pipelines.filter((p) => p.source.backend !== "http_upload");
    if (runnable.length === 0) {
      throw new WorkflowError(
        "nothing_to_run",
        `nothing ran: every pipeline of the configuration has an http_upload source, and those run only under distributor serve${restore}`,
      );
    }
    return runnable;
  }
  const wanted = ids.map((id) => findPipeline(config, id));
  for (const pipeline of wanted) {
    if (pipeline.source.backend === "http_upload" && sources?.[pipeline.id] === undefined) {
      throw new WorkflowError(
        "unsupported_source",
        `pipeline ${pipeline.id} has an http_upload source and runs only under serve${restore}`,
      );
    }
  }
  return config.pipelines.filter((pipeline) => wanted.includes(pipeline));
}

async function runPipeline(
  options: RunOptions,
  pipeline: PipelineConfig,
  report: RunReport,
  hooks: RunHooks,
) {
  const given = options.sources?.[pipeline.id];
  const source =
    given ??
    (await openBackend(options.backends, sourceLocation(pipeline), {
      role: "source",
      dryRun: options.dryRun ?? false,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    }));
  try {
    const bundles = await readPipelineManifests(options, pipeline, source);
    // Parsing a big manifest and checking its names are each a long synchronous stretch: the
    // event loop turns between them and before the destinations are planned.
    await nextTurn();
    await checkPortableNames(pipeline, bundles, report);
    await nextTurn();
    // Full validation hashes every file, so it waits until some destination will write: a run
    // in which every destination skips reads manifests and state files only (docs/design/bundles.md). Once
    // needed, every bundle of the pipeline is validated, so one invalid bundle publishes nothing.
    let validation: Promise<void> | undefined;
    const validateAll = () => {
      validation ??= validatePipelineBundles(options, pipeline, source, bundles);
      return validation;
    };
    // Renderings are keyed by content, so every destination and bundle may share them.
    const cache = new RenderCache();
    for (const destination of pipeline.destinations) {
      const targets =
        destination.pathMapping.mode === "fixed"
          ? [selectNewestBundle(bundles)]
              .filter((b) => b !== undefined)
              .map((b) => ({ bundle: b, bundlePath: "" }))
          : bundles.map((bundle) => ({ bundle, bundlePath: bundle.path }));
      const context: DestinationContext = {
        options,
        pipeline,
        destination,
        source,
        cache,
        validateAll,
        onPublishPlan: hooks.onPublishPlan,
      };
      await runDestination(context, targets, report);
    }
  } finally {
    // A source that fails to close has already given what the run needed.
    if (given === undefined) await source.close().catch(() => undefined);
  }
}
