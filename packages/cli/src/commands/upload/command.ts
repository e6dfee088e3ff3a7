import { UsageError } from "../../errors.js";
import {
  booleanFlag,
  extraPositionals,
  optionalString,
  outputFormat,
  type RawFlags,
  requiredString,
} from "../../flags.js";
import {
  formatFlag,
  maxFilesFlag,
  positionalPath,
  signatureNamespaceFlag,
  signFlag,
  signingOptions,
} from "../options.js";
import { defineCommand } from "../spec.js";
import type { UploadCommandOptions } from "./options.js";

/** `--token-env` of `upload` when the flag is omitted. */
export const DEFAULT_UPLOAD_TOKEN_ENV = "DISTRIBUTOR_UPLOAD_TOKEN";

export const upload = defineCommand<UploadCommandOptions>({
  command: "upload [path]",
  name: "upload",
  describe: "Send a bundle to a distributor serve endpoint for a pipeline to publish",
  usage:
    "Usage:\n  distributor upload --server <url> --pipeline <id> [--token-env <NAME>] [--idempotency-key <key>] [--wait] [--max-files <n>] [--sign <key-file>] [--signature-namespace <ns>] [--format text|json] <bundle-path>",
  positionals: {
    path: { type: "string", describe: "Bundle directory (holding manifest.json) to upload" },
  },
  flags: {
    server: {
      type: "string",
      describe: "Base URL of the upload server, e.g. https://publish.example.com (required)",
    },
    pipeline: {
      type: "string",
      describe: "Pipeline whose http_upload source receives the bundle (required)",
    },
    "token-env": {
      type: "string",
      describe: `Environment variable holding the upload token (default ${DEFAULT_UPLOAD_TOKEN_ENV})`,
    },
    "idempotency-key": {
      type: "string",
      describe:
        "Key that makes a repeated upload return the first one's run (1-255 visible ASCII; default: generated)",
    },
    wait: {
      type: "boolean",
      describe: "Wait for the run to finish; the exit status is then 1 when it failed",
    },
    "max-files": {
      type: "string",
      describe:
        "Most files the bundle may list, checked before sending: as many as the server's pipeline accepts (default 10000)",
    },
    sign: signFlag,
    "signature-namespace": signatureNamespaceFlag,
    format: formatFlag,
  },
  epilog:
    "The bundle is validated locally first (manifest, sizes, sha256, no unlisted files or\n" +
    "symlinks), then streamed as a gzip tar archive. A 503 or a broken connection is retried\n" +
    "with the same idempotency key, honouring Retry-After. Without --wait the command succeeds\n" +
    "once the server has accepted the upload. --sign first signs the manifest into\n" +
    "manifest.json.sig in the bundle directory (as manifest create --sign does); a\n" +
    "manifest.json.sig already there is sent either way.",
  parse(flags) {
    const options = uploadOptions(flags);
    return { format: outputFormat(flags), options };
  },
  load: async () => (await import("./handler.js")).uploadCommand,
});

function uploadOptions(flags: RawFlags): UploadCommandOptions {
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("upload accepts one bundle path");
  }
  const server = requiredString(flags, "server", "upload");
  const pipelineId = requiredString(flags, "pipeline", "upload");
  const path = positionalPath(flags);
  if (path === undefined) throw new UsageError("upload requires a bundle path");
  let url: URL | undefined;
  try {
    url = new URL(server);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new UsageError(
      `upload --server must be an http or https URL, got ${JSON.stringify(server)}`,
    );
  }
  const tokenEnv = optionalString(flags, "token-env") ?? DEFAULT_UPLOAD_TOKEN_ENV;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(tokenEnv)) {
    throw new UsageError(
      `upload --token-env must name an environment variable, got ${JSON.stringify(tokenEnv)}`,
    );
  }
  const idempotencyKey = optionalString(flags, "idempotency-key");
  const maxFiles = maxFilesFlag(flags, "upload");
  return {
    server,
    pipelineId,
    tokenEnv,
    wait: booleanFlag(flags, "wait"),
    path,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    ...(maxFiles === undefined ? {} : { maxFiles }),
    ...signingOptions(flags, "upload"),
  };
}
