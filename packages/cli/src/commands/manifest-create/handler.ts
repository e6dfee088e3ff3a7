import type { CommandHandler, ManifestCreateCommandOptions } from "../command.js";
import { UsageError } from "../errors.js";
import { manifestCreateOutcome } from "../render/manifest.js";

export const manifestCreateCommand: CommandHandler<ManifestCreateCommandOptions> = async (
  options,
  context,
) => {
  const { bundleIdProblem, parseTimestamp } = await import("@distributor/bundle");
  const idProblem = bundleIdProblem(options.id);
  if (idProblem !== undefined) throw new UsageError(`manifest create --id: ${idProblem}`);
  let created: Date | undefined;
  if (options.created !== undefined) {
    const parsed = parseTimestamp(options.created);
    if (!parsed.ok) {
      throw new UsageError(
        `manifest create --created must be an RFC 3339 timestamp with an offset (e.g. 2026-06-04T11:55:00Z), got ${JSON.stringify(options.created)}: ${parsed.problem}`,
      );
    }
    created = parsed.date;
  }
  const { createManifestWorkflow } = await import("@distributor/publish");
  const report = await createManifestWorkflow({
    path: options.path,
    id: options.id,
    force: options.force,
    signal: context.signal,
    ...(options.maxFiles === undefined ? {} : { maxFiles: options.maxFiles }),
    ...(options.sign === undefined
      ? {}
      : { sign: { keyFile: options.sign, namespace: options.signatureNamespace } }),
    ...(created === undefined ? {} : { created }),
  });
  return manifestCreateOutcome(report);
};
