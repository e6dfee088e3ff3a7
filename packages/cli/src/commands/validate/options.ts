/** What `distributor validate` hands its handler once its flags are checked. */
export type ValidateCommandOptions =
  | {
      kind: "path";
      path: string;
      /** `--allowed-signers`: check every bundle's signature against this file. */
      allowedSigners?: string;
      /** `--signature-namespace` (default `distributor`). */
      signatureNamespace?: string;
    }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string };
