import type { RunActionReport, SavedPlan, SavedPlanEntry } from "@distributor/publish";
import { formatBytes } from "./progress.js";
import { summaryLine } from "./text.js";

/** Digests are shown by their first 12 hex digits, as `git` shows commits: enough to compare. */
function shortDigest(digest: string): string {
  return digest.startsWith("sha256:") ? `sha256:${digest.slice(7, 19)}` : digest.slice(0, 19);
}

function display(bundlePath: string, path: string): string {
  return bundlePath === "" ? path : `${bundlePath}/${path}`;
}

/**
 * A plan for review: one header line, then per destination bundle path a summary line (with the
 * check's status and error when `actions` come from `apply --dry-run`) and one line per change —
 * `+ create`, `~ replace`, `- delete` — and what `.distributor.json` will become.
 */
export function planLines(
  plan: SavedPlan,
  file: string,
  actions?: readonly RunActionReport[],
): string[] {
  const lines = [
    summaryLine("Plan", [
      ["file", file],
      ["planned_at", plan.planned_at],
      ["distributor", plan.distributor_version],
      ["config", plan.config_path],
      ["force", plan.force],
      ["repair", plan.repair],
      ["destinations", plan.destinations.length],
    ]),
  ];
  plan.destinations.forEach((entry, index) => {
    const checked = actions?.[index];
    lines.push(entryLine(entry, checked));
    lines.push(...changeLines(entry));
  });
  return lines;
}

function entryLine(entry: SavedPlanEntry, checked: RunActionReport | undefined): string {
  const deletes = entry.deletes_first.length + entry.deletes.length;
  return summaryLine(undefined, [
    ["pipeline", entry.pipeline_id],
    ["destination", entry.destination_id],
    ["bundle", entry.bundle_path === "" ? "." : entry.bundle_path],
    ["source", entry.source.manifest_id],
    ["action", entry.action],
    ...(checked === undefined ? [] : ([["status", checked.status]] as const)),
    ["writes", entry.writes.length],
    ["deletes", entry.clear_bundle_path ? "all-unplanned" : deletes],
    ["state_version", entry.state_version ?? "absent"],
    ...(checked?.error ? ([["error", checked.error.code]] as const) : []),
  ]);
}

function changeLines(entry: SavedPlanEntry): string[] {
  const where = (path: string) => display(entry.bundle_path, path);
  const lines: string[] = [];
  if (entry.writes.length === 0 && entry.next_state === null) {
    lines.push(`  = nothing to write: ${entry.reason}`);
    return lines;
  }
  for (const path of entry.deletes_first) lines.push(`  - delete   ${where(path)}  (first)`);
  for (const write of entry.writes) {
    const verb = write.overwrite ? "~ replace " : "+ create  ";
    const made = write.kind === "generated" ? `  from ${write.source_path}` : "";
    lines.push(
      `  ${verb}${where(write.path)}  ${formatBytes(write.size)}  ${shortDigest(write.sha256)}${made}`,
    );
  }
  for (const path of entry.deletes) lines.push(`  - delete   ${where(path)}`);
  if (entry.clear_bundle_path) {
    lines.push(
      `  - delete   everything else below ${entry.bundle_path === "" ? "the destination root" : entry.bundle_path} (forced replacement)`,
    );
  }
  if (entry.next_state !== null) {
    const state = entry.next_state as { schema_version?: unknown; outputs?: unknown };
    const outputs = Array.isArray(state.outputs) ? state.outputs.length : 0;
    lines.push(
      `  state     ${where(".distributor.json")}  schema_version=${String(state.schema_version)} outputs=${outputs}  ${shortDigest(entry.next_state_sha256 ?? "")}`,
    );
  }
  return lines;
}
