import { isReleaseId } from "@distributor/state";
import { locatePath, type StorageBackend } from "@distributor/storage";
import { type AdviceFlags, adviceCommand } from "./advice.js";
import { liveRecords, wentLive } from "./live-records.js";
import { ReleaseRefusedError } from "./refused.js";
import { stagedAmong } from "./releases.js";
import { previousPublication } from "./sources.js";

/** What choosing a rollback's or promotion's target looks at (see `RollbackOptions`). */
export interface TargetChoice {
  destination: StorageBackend;
  bundlePath: string;
  to?: string | undefined;
  restoreInvalidState?: boolean | undefined;
  promote?: boolean | undefined;
  latest?: boolean | undefined;
  signal?: AbortSignal | undefined;
  /** The flags advice names (see `AdviceFlags`). */
  advice?: AdviceFlags | undefined;
}

/**
 * The release a rollback or promotion switches to, of the committed ones (`available`, oldest
 * first): `to`; for a promotion a staged one only (`latest`: the newest); for a rollback without
 * `to` the previous publication; for a restore the release readers see.
 */
export async function chooseTarget(
  options: TargetChoice,
  available: readonly string[],
  live: string | undefined,
  /** The release the state records: what `--previous` goes back from when `current` is missing. */
  recorded: string | undefined,
): Promise<string> {
  const where = locatePath(options.destination.location, options.bundlePath);
  const listed = available.length === 0 ? "none" : available.join(", ");
  if (options.restoreInvalidState && options.to === undefined) {
    const recorded = await liveRecords(options.destination, options.bundlePath, options.signal);
    return chooseRestored(options, available, live, recorded);
  }
  if (options.promote) return chooseStaged(options, available, live ?? recorded);
  if (options.to !== undefined) {
    if (!isReleaseId(options.to)) {
      throw new ReleaseRefusedError(
        "invalid_release_id",
        `"${options.to}" is not a release id (like 20261204T093819.123Z-ab12); ${where} has these committed releases: ${listed}`,
      );
    }
    if (!available.includes(options.to)) {
      throw new ReleaseRefusedError(
        "release_not_found",
        `${where} has no committed release ${options.to} (releases: ${listed})`,
      );
    }
    return options.to;
  }
  const from = live ?? recorded;
  if (from === undefined) {
    throw new ReleaseRefusedError(
      "no_previous_release",
      `${where} has no current release to roll back from (releases: ${listed})`,
    );
  }
  // Only releases that went live: a staged release never promoted is not "the previous" one.
  const previous = await previousPublication(
    options.destination,
    options.bundlePath,
    await wentLive(options.destination, options.bundlePath, available, options.signal),
    from,
    options.signal,
  );
  if (previous === undefined) {
    const before = available.some((id) => id < from);
    throw new ReleaseRefusedError(
      "no_previous_release",
      before
        ? `${where}: every committed release before ${from} published the same source (a repair or a re-publication); choose one with --to (releases: ${listed})`
        : `${where}: no committed release before ${from} (releases: ${listed})`,
    );
  }
  return previous;
}

function chooseStaged(
  options: TargetChoice,
  available: readonly string[],
  base: string | undefined,
): string {
  const where = locatePath(options.destination.location, options.bundlePath);
  const staged = stagedAmong(available, base);
  const listed = staged.length === 0 ? "none" : staged.join(", ");
  const to = options.latest ? staged[staged.length - 1] : options.to;
  if (to === undefined) {
    throw new ReleaseRefusedError(
      "no_staged_release",
      `${where} has no staged release (none newer than the live release ${base ?? "(none)"}); nothing was changed — publish a new source with \`${adviceCommand("run", options.advice, "run", "--stage")}\` to stage one`,
    );
  }
  if (!isReleaseId(to)) {
    throw new ReleaseRefusedError(
      "invalid_release_id",
      `"${to}" is not a release id (like 20261204T093819.123Z-ab12); ${where} has these staged releases: ${listed}`,
    );
  }
  if (!available.includes(to)) {
    throw new ReleaseRefusedError(
      "release_not_found",
      `${where} has no committed release ${to} (staged releases: ${listed})`,
    );
  }
  // Promoting the release already in force changes nothing, as a repeated rollback does not.
  if (to === base && available.includes(to)) return to;
  if (!staged.includes(to)) {
    throw new ReleaseRefusedError(
      "not_staged",
      `${where}: release ${to} is not staged (it is not newer than the live release ${base ?? "(none)"}); nothing was changed — to return to it, run \`${adviceCommand("rollback", options.advice, "owner", "--to", to)}\``,
    );
  }
  return to;
}

/**
 * The release a rebuild restores the state from: the one `current` links to. When `current`
 * dangles, the newest committed release not newer than the one it named (that one went live; a
 * newer one may be staged, never approved). When `current` is missing, the newest release with a
 * live record; without one, which release was live cannot be told: refused rather than guessed,
 * so that no staged release goes live unreviewed.
 */
function chooseRestored(
  options: TargetChoice,
  available: readonly string[],
  live: string | undefined,
  /** The releases with a live record: each went live once. */
  recorded: ReadonlySet<string>,
): string {
  const where = locatePath(options.destination.location, options.bundlePath);
  const listed = available.length === 0 ? "none" : available.join(", ");
  if (live !== undefined && available.includes(live)) return live;
  const chosen =
    live === undefined
      ? available.filter((id) => recorded.has(id)).at(-1)
      : available.filter((id) => id <= live).at(-1);
  if (chosen !== undefined) return chosen;
  if (available.length === 0) {
    throw new ReleaseRefusedError(
      "release_not_found",
      `${where} has no committed release to restore the state from; move the state away and publish again with \`${adviceCommand("run", options.advice, "run")}\``,
    );
  }
  throw new ReleaseRefusedError(
    "live_release_unknown",
    live === undefined
      ? `${where}: current is missing, so which committed release was live cannot be told (releases: ${listed}; any of them may be staged, never approved); nothing was changed — move the state away (it cannot be read), then make the release you choose live with \`${adviceCommand("rollback", options.advice, "owner", "--to", "<id>")}\``
      : `${where}: current links to release ${live}, which is gone, and no committed release is as old (releases: ${listed}; a newer one may be staged, never approved); nothing was changed — move the state away (it cannot be read), then make the release you choose live with \`${adviceCommand("rollback", options.advice, "owner", "--to", "<id>")}\``,
  );
}
