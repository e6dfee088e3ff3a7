import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import type { ValidateCommandOptions } from "./options.js";
import { validateOutcome } from "./render.js";

export const validateCommand: CommandHandler<ValidateCommandOptions> = async (options, context) => {
  const common = { backends: context.backends, signal: context.signal };
  if (options.kind === "path") {
    const signatures =
      options.allowedSigners === undefined
        ? {}
        : {
            signatures: {
              allowedSigners: options.allowedSigners,
              namespace: options.signatureNamespace,
            },
          };
    return validateOutcome(
      await publish.validateBundlePath({ path: options.path, ...signatures, ...common }),
    );
  }
  const config = await publish.loadConfig(options.configPath);
  const report = await publish.validateConfiguredSource({
    config,
    pipelineId: options.pipelineId,
    ...(options.bundlePath === undefined ? {} : { bundlePath: options.bundlePath }),
    ...common,
  });
  return validateOutcome(report);
};
