import type {
  BundleInspection,
  InspectReport,
  ReleaseListing,
  StateReport,
  StateTreeInspection,
} from "@distributor/publish";
import type { CommandOutcome } from "../../command.js";
import { summaryLine } from "../../render/text.js";
import { bundlesOutcome } from "../validate/render.js";

/** `inspect`: bundles with one line per file, or state with one line per owner and output. */
export function inspectOutcome(report: InspectReport): CommandOutcome {
  if (report.kind === "state") return { ok: true, result: report, text: stateLines(report) };
  return bundlesOutcome(report, report.bundles.flatMap(bundleLines));
}

function bundleLines(bundle: BundleInspection): string[] {
  const manifest = bundle.manifest;
  return [
    summaryLine("Bundle", [
      ["path", bundle.path],
      ["id", manifest?.id],
      ["created", manifest?.created],
      ["digest", manifest?.digest],
      ["files", manifest === null ? null : bundle.files.length],
      ["total_size", bundle.total_size],
      ["status", bundle.ok ? "valid" : "invalid"],
    ]),
    ...bundle.files.map((file) =>
      summaryLine("File", [
        ["path", file.path],
        ["size", file.size],
        ["sha256", file.sha256],
        ["status", file.status],
        ...(file.actual_size === undefined ? [] : ([["actual_size", file.actual_size]] as const)),
        ...(file.actual_sha256 === undefined
          ? []
          : ([["actual_sha256", file.actual_sha256]] as const)),
      ]),
    ),
    ...bundle.unlisted_files.map((path) => summaryLine("Unlisted", [["path", path]])),
  ];
}

function stateLines(report: StateTreeInspection): string[] {
  return [
    summaryLine("Destination", [
      ...(report.pipeline_id === undefined ? [] : ([["pipeline", report.pipeline_id]] as const)),
      ...(report.destination_id === undefined
        ? []
        : ([["destination", report.destination_id]] as const)),
      ["location", report.location],
      ["states", report.states.length],
    ]),
    ...report.states.flatMap(stateReportLines),
    // Releases of a root whose publications were all staged (no state yet).
    ...(report.staged_without_state ?? []).map(releaseLine),
    // A lease where no state is yet: a first publication under way, or one that was killed.
    ...report.leases_without_state.map(({ bundle_path, lease }) =>
      summaryLine("Lease", [
        ["path", bundle_path],
        ["state", "none"],
        ["owner", `${lease.owner.pipeline_id}/${lease.owner.destination_id}`],
        ["run_id", lease.run_id],
        ["host", lease.host],
        ["pid", lease.pid],
        ["acquired_at", lease.acquired_at],
        ["expires_at", lease.expires_at],
        ["journal", lease.journal_entries],
      ]),
    ),
  ];
}

function stateReportLines(state: StateReport): string[] {
  return [
    summaryLine("State", [
      ["path", state.path],
      ["schema_version", state.schema_version],
      ["mode", state.mode],
      ["created_at", state.created_at],
      ["updated_at", state.updated_at],
      ["owners", state.owners.length],
      ["outputs", state.outputs.length],
    ]),
    ...(state.lease === null
      ? []
      : [
          summaryLine("Lease", [
            ["path", state.path],
            ["owner", `${state.lease.owner.pipeline_id}/${state.lease.owner.destination_id}`],
            ["run_id", state.lease.run_id],
            ["host", state.lease.host],
            ["pid", state.lease.pid],
            ["acquired_at", state.lease.acquired_at],
            ["expires_at", state.lease.expires_at],
            ["journal", state.lease.journal_entries],
          ]),
        ]),
    ...state.owners.map((owner) =>
      summaryLine("Owner", [
        ["pipeline", owner.pipeline_id],
        ["destination", owner.destination_id],
        ["reconciliation", owner.reconciliation],
        ["source_id", owner.source.id],
        ["source_created", owner.source.created],
        ["source_digest", owner.source.digest],
        // Only when the pipeline checked the source bundle's signature.
        ...(owner.source.signer === undefined
          ? []
          : ([
              ["signer", owner.source.signer.principal],
              ["signer_key", owner.source.signer.fingerprint],
            ] as const)),
        ["outputs", owner.outputs],
        ["primary_url", owner.primary_url],
        // Only while a write is under way (or died there): see docs/operations.md.
        ...(owner.replacing === undefined
          ? []
          : ([
              ["replacing_run", owner.replacing.run_id],
              ["replacing_since", owner.replacing.started_at],
            ] as const)),
      ]),
    ),
    ...(state.releases ?? []).map(releaseLine),
    ...state.outputs.map((output) =>
      summaryLine("Output", [
        ["path", output.path],
        ["kind", output.kind],
        ["source_path", output.source_path],
        ["size", output.size],
        ["sha256", output.sha256],
        ["updated_at", output.updated_at],
        ["owner", `${output.pipeline_id}/${output.destination_id}`],
      ]),
    ),
  ];
}

function releaseLine(release: ReleaseListing): string {
  return summaryLine("Release", [
    ["id", release.id],
    ["status", release.status],
    ["current", release.current ? "yes" : "no"],
    ["recorded", release.recorded ? "yes" : "no"],
    ["source_id", release.source_id],
    ["source_created", release.source_created],
    ["published_at", release.published_at],
    ["outputs", release.outputs],
    ...(release.preview_url === null ? [] : ([["preview_url", release.preview_url]] as const)),
  ]);
}
