import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import type { InspectCommandOptions } from "./options.js";
import { inspectOutcome } from "./render.js";

export const inspectCommand: CommandHandler<InspectCommandOptions> = async (options, context) => {
  const common = { backends: context.backends, signal: context.signal };
  if (options.kind === "path") {
    return inspectOutcome(await publish.inspectPath({ path: options.path, ...common }));
  }
  const config = await publish.loadConfig(options.configPath);
  if (options.kind === "destination") {
    const report = await publish.inspectConfiguredDestination({
      config,
      pipelineId: options.pipelineId,
      destinationId: options.destinationId,
      ...common,
    });
    return inspectOutcome(report);
  }
  const report = await publish.inspectConfiguredSource({
    config,
    pipelineId: options.pipelineId,
    ...(options.bundlePath === undefined ? {} : { bundlePath: options.bundlePath }),
    ...common,
  });
  return inspectOutcome(report);
};
