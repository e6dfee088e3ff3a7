/** What `distributor manifest create` hands its handler once its flags are checked. */
export interface ManifestCreateCommandOptions {
  path: string;
  id: string;
  /** The `--created` value as typed; the handler parses it. */
  created?: string;
  force: boolean;
  /** `--max-files`: most files to list (default 100000). */
  maxFiles?: number;
  /** `--sign`: the key file `ssh-keygen -Y sign -f` takes. */
  sign?: string;
  /** `--signature-namespace` (default `distributor`). */
  signatureNamespace?: string;
}
