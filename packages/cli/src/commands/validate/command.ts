import { UsageError } from "../../errors.js";
import { extraPositionals, optionalString, outputFormat, type RawFlags } from "../../flags.js";
import { formatFlag, sourceSelection } from "../options.js";
import { defineCommand } from "../spec.js";
import type { ValidateCommandOptions } from "./options.js";

export const validate = defineCommand<ValidateCommandOptions>({
  command: "validate [path]",
  name: "validate",
  describe: "Check a bundle, a tree of bundles, or the bundles of a configured source",
  usage:
    "Usage:\n  distributor validate [--allowed-signers <file> [--signature-namespace <ns>]] [--format text|json] <path>\n" +
    "  distributor validate --config <path> --pipeline <id> [--bundle <path>] [--format text|json]",
  positionals: {
    path: {
      type: "string",
      describe: "Local bundle directory, or a directory holding several bundles",
    },
  },
  flags: {
    config: { type: "string", describe: "Configuration file naming the source" },
    pipeline: { type: "string", describe: "Pipeline whose source is checked" },
    bundle: {
      type: "string",
      describe: "Only the bundle at this path relative to the source root (default: every bundle)",
    },
    "allowed-signers": {
      type: "string",
      describe:
        "With a path: require manifest.json.sig by a key this OpenSSH allowed_signers file trusts",
    },
    "signature-namespace": {
      type: "string",
      describe: "SSHSIG namespace --allowed-signers checks (default: distributor)",
    },
    format: formatFlag,
  },
  epilog:
    "A bundle passes when its manifest parses and every listed file exists with the listed\n" +
    "size and sha256. With --config the pipeline's validation policy applies, its\n" +
    "source.signatures included; with a path, --allowed-signers checks signatures too.",
  parse(flags) {
    const options = validateOptions(flags);
    return { format: outputFormat(flags), options };
  },
  load: async () => (await import("./handler.js")).validateCommand,
});

function validateOptions(flags: RawFlags): ValidateCommandOptions {
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("validate accepts one path");
  }
  const selected = sourceSelection(flags, "validate");
  const allowedSigners = optionalString(flags, "allowed-signers");
  const signatureNamespace = optionalString(flags, "signature-namespace");
  if (selected.kind === "config") {
    if (allowedSigners !== undefined || signatureNamespace !== undefined) {
      throw new UsageError(
        "validate --config checks signatures as the pipeline's source.signatures says; --allowed-signers and --signature-namespace go with a path",
      );
    }
    return selected;
  }
  if (signatureNamespace !== undefined && allowedSigners === undefined) {
    throw new UsageError("validate --signature-namespace needs --allowed-signers <file>");
  }
  return {
    ...selected,
    ...(allowedSigners === undefined ? {} : { allowedSigners }),
    ...(signatureNamespace === undefined ? {} : { signatureNamespace }),
  };
}
