import { resolve } from "node:path";
import type { RetryNotice, RunRecord, UploadProgress } from "@distributor/upload-client";
import * as client from "@distributor/upload-client";
import type { CommandHandler } from "../../command.js";
import { UsageError } from "../../errors.js";
import type { UploadCommandOptions } from "./options.js";
import { uploadOutcome } from "./render.js";

/** The upload token's variable is unset or empty: nothing to authenticate with. */
export class UploadTokenError extends Error {
  override readonly name = "UploadTokenError";
  readonly code = "token_missing";
}

export const uploadCommand: CommandHandler<UploadCommandOptions> = async (options, context) => {
  const token = context.io.env?.[options.tokenEnv];
  if (token === undefined || token === "") {
    throw new UploadTokenError(
      `upload: environment variable ${options.tokenEnv} is ${token === undefined ? "not set" : "empty"}; set it to the upload token (or name another variable with --token-env)`,
    );
  }
  if (options.idempotencyKey !== undefined) {
    const problem = client.idempotencyKeyProblem(options.idempotencyKey);
    if (problem !== undefined) throw new UsageError(`upload --idempotency-key: ${problem}`);
  }
  const uploader = client.createUploadClient({ server: options.server, token });
  // Under --format json stderr carries only what an interactive terminal shows (docs/cli.md).
  const tellRetries = context.format === "text" || context.io.stderrIsTTY === true;
  const onRetry = ({ error, delayMs, attempt }: RetryNotice) => {
    if (!tellRetries) return;
    context.io.stderr.write(
      `distributor: ${error.message}; retrying in ${(delayMs / 1000).toFixed(1)}s (attempt ${attempt + 1})\n`,
    );
  };
  // A resumed attempt says where it starts; a terminal also sees each tenth sent.
  let shownTenth = -1;
  const onProgress = ({ offset, total, resumed }: UploadProgress) => {
    if (!tellRetries) return;
    const percent = total === 0 ? 100 : (100 * offset) / total;
    if (resumed) {
      context.io.stderr.write(
        `distributor: resuming the upload at ${mebibytes(offset)} of ${mebibytes(total)} (${percent.toFixed(1)}%), held by the server\n`,
      );
      return;
    }
    const tenth = Math.floor(percent / 10);
    if (context.io.stderrIsTTY !== true || tenth === shownTenth) return;
    shownTenth = tenth;
    context.io.stderr.write(`distributor: sent ${mebibytes(offset)} of ${mebibytes(total)}\n`);
  };
  const accepted = await uploader.upload(resolve(options.path), {
    pipeline: options.pipelineId,
    signal: context.signal,
    onRetry,
    onProgress,
    ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
    ...(options.sign === undefined
      ? {}
      : { sign: { keyFile: options.sign, namespace: options.signatureNamespace } }),
    // A refusal names this command's flag: the pipeline's configuration is not the producer's.
    validation: {
      ...(options.maxFiles === undefined ? {} : { maxFiles: options.maxFiles }),
      maxFilesSetting: {
        name: "--max-files",
        raise:
          "pass --max-files with as many files as the server's pipeline accepts (ask its operator)",
      },
    },
  });
  if (options.wait) {
    const run = await uploader.waitForRun(accepted.run_id, { signal: context.signal });
    return uploadOutcome(accepted, { record: run, final: true });
  }
  // A replay answers with the run as it was first accepted, perhaps long finished since.
  if (!accepted.replayed) return uploadOutcome(accepted, null);
  let current: RunRecord;
  try {
    current = await uploader.getRun(accepted.run_id, { signal: context.signal });
  } catch (error) {
    // The upload was accepted all the same: a status that cannot be read now does not undo it.
    if (context.signal.aborted) throw error;
    return {
      ...uploadOutcome(accepted, null),
      warnings: [
        `run ${accepted.run_id} was accepted before (replayed), but its current status could not be read: ${(error as Error).message}; status shows the run as first accepted`,
      ],
    };
  }
  return uploadOutcome(accepted, { record: current, final: false });
};

function mebibytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
