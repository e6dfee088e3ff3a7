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
import type { ManifestCreateCommandOptions } from "./options.js";

/** The subcommands of `manifest`. */
const SUBCOMMANDS: readonly string[] = ["create"];

export const manifestCreate = defineCommand<ManifestCreateCommandOptions>({
  // One subcommand only; a nested yargs command would misreport extra positionals.
  command: "manifest [subcommand] [path]",
  name: "manifest create",
  describe: "Write manifest.json for a bundle directory (manifest create)",
  usage:
    "Usage:\n  distributor manifest create --id <bundle-id> [--created <rfc3339>] [--force] [--max-files <n>] [--sign <key-file>] [--signature-namespace <ns>] [--format text|json] <bundle-path>",
  subcommands: SUBCOMMANDS,
  positionals: {
    subcommand: { type: "string", describe: "create (the only subcommand)", choices: SUBCOMMANDS },
    path: { type: "string", describe: "Bundle directory to list" },
  },
  flags: {
    id: { type: "string", describe: "Bundle id recorded in the manifest" },
    created: {
      type: "string",
      describe: "Creation time, RFC 3339 with an offset (default: now, whole seconds, UTC)",
    },
    force: { type: "boolean", describe: "Overwrite an existing manifest.json" },
    "max-files": {
      type: "string",
      describe: "Most files to list; a bigger bundle is refused, nothing written (default 100000)",
    },
    sign: signFlag,
    "signature-namespace": signatureNamespaceFlag,
    format: formatFlag,
  },
  epilog:
    "Lists every regular file below the bundle directory with its sha256 and size. Symbolic\n" +
    "links are refused, and an existing manifest.json is kept unless --force is given.\n" +
    "--sign runs ssh-keygen -Y sign over the manifest written and checks the signature it\n" +
    "made before writing manifest.json.sig; a pipeline with source.signatures verifies it.",
  parse(flags) {
    const options = manifestCreateOptions(flags);
    return { format: outputFormat(flags), options };
  },
  load: async () => (await import("./handler.js")).manifestCreateCommand,
});

function manifestCreateOptions(flags: RawFlags): ManifestCreateCommandOptions {
  const subcommand = flags.subcommand;
  if (subcommand === undefined) throw new UsageError("manifest requires a subcommand: create");
  if (!SUBCOMMANDS.includes(String(subcommand))) {
    throw new UsageError(`unknown command ${JSON.stringify(`manifest ${String(subcommand)}`)}`);
  }
  if (extraPositionals(flags, 1).length > 0) {
    throw new UsageError("manifest create accepts one bundle path");
  }
  const id = requiredString(flags, "id", "manifest create");
  const path = positionalPath(flags);
  if (path === undefined) throw new UsageError("manifest create requires a bundle path");
  const created = optionalString(flags, "created");
  const force = booleanFlag(flags, "force");
  const maxFiles = maxFilesFlag(flags, "manifest create");
  return {
    path,
    id,
    force,
    ...(created === undefined ? {} : { created }),
    ...(maxFiles === undefined ? {} : { maxFiles }),
    ...signingOptions(flags, "manifest create"),
  };
}
