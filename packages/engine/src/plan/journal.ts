import { posix } from "node:path";
import type { PlanJournal, PublishPlan } from "./plan-types.js";

// The journal a write plan records in its lease, for recovery to finish or undo it.

/**
 * The journal of a write plan: paths it writes (and so may create) or will delete, and the
 * directories its temp files may appear in (the bundle path itself holds the state's).
 */
export function journalOf(
  plan: Pick<PublishPlan, "writes" | "deletesFirst" | "deletes">,
): PlanJournal {
  // Overwrites are journaled too: recovery keeps whatever a state records, and a killed upload
  // of any written path leaves multipart parts to abort.
  const paths = [
    ...plan.writes.map((write) => write.output.path),
    ...plan.deletesFirst,
    ...plan.deletes,
  ];
  const directories = new Set([""]);
  for (const write of plan.writes) {
    const dir = posix.dirname(write.output.path);
    directories.add(dir === "." ? "" : dir);
  }
  // Recorded outputs this attempt changes before its commit: replaced in place, or deleted ahead
  // of the writes. Should it die there, recovery checks each against the state.
  const overwrites = [
    ...plan.writes.filter((write) => write.overwrite).map((write) => write.output.path),
    ...plan.deletesFirst,
  ];
  return { paths, directories: [...directories], overwrites };
}
