import { bundleIdProblem, parseTimestamp } from "@distributor/bundle";
import { createManifestWorkflow } from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { UsageError } from "../../errors.js";
import type { ManifestCreateCommandOptions } from "./options.js";
import { manifestCreateOutcome } from "./render.js";

export const manifestCreateCommand: CommandHandler<ManifestCreateCommandOptions> = async (
  options,
  context,
) => {
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
