/**
 * Who a refusal's advice is for: the flags a command it names needs to act on the same
 * destination, so that the advice works exactly as written (`--config`, `--pipeline`,
 * `--destination`, `--bundle-path`). Without them (a library caller), advice names the command
 * alone.
 */
export interface AdviceFlags {
  config: string;
  pipeline: string;
  destination: string;
  /** The destination bundle path, when not the destination root. */
  bundlePath?: string | undefined;
}

/**
 * `distributor <command>` with `args`, then the flags that name the destination: all of them
 * (`owner`), or only those `run` takes (`--config`, `--pipeline`).
 */
export function adviceCommand(
  command: string,
  flags: AdviceFlags | undefined,
  scope: "owner" | "run",
  ...args: string[]
): string {
  const words = ["distributor", command, ...args];
  if (flags !== undefined) {
    words.push("--config", quoted(flags.config), "--pipeline", quoted(flags.pipeline));
    if (scope === "owner") {
      words.push("--destination", quoted(flags.destination));
      const bundle = flags.bundlePath;
      if (bundle !== undefined && bundle !== "" && bundle !== "." && bundle !== "/") {
        words.push("--bundle-path", quoted(bundle));
      }
    }
  }
  return words.join(" ");
}

/** A word a POSIX shell reads back as itself. */
function quoted(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
