import type { CommandHandler, ValidateCommandOptions } from "../command.js";
import { validateOutcome } from "../render/validate.js";

export const validateCommand: CommandHandler<ValidateCommandOptions> = async (options, context) => {
  const publish = await import("@distributor/publish");
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
