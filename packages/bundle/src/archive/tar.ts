/**
 * `tar` is loaded on the first archive call, not with the package: every `run` imports this
 * package to validate bundles, and loading `tar` cost about 16 ms of each run's startup.
 */
export type Tar = typeof import("tar");

let loading: Promise<Tar> | undefined;

export function loadTar(): Promise<Tar> {
  loading ??= import("tar");
  return loading;
}
