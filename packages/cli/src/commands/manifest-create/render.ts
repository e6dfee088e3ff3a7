import type { ManifestCreateReport } from "@distributor/publish";
import type { CommandOutcome } from "../../command.js";
import { summaryLine } from "../../render/text.js";

/** `manifest create`: one line describing the manifest written, and its warnings on stderr. */
export function manifestCreateOutcome(report: ManifestCreateReport): CommandOutcome {
  return {
    ok: true,
    result: report,
    text: [
      summaryLine("Manifest", [
        ["path", report.manifest_path],
        ["id", report.id],
        ["created", report.created],
        ["digest", report.digest],
        ["files", report.files],
        ["total_size", report.total_size],
      ]),
      ...(report.signature === undefined
        ? []
        : [
            summaryLine("Signature", [
              ["path", report.signature.path],
              ["key", report.signature.fingerprint],
              ["type", report.signature.key_type],
              ["namespace", report.signature.namespace],
            ]),
          ]),
    ],
    warnings: report.warnings.map((warning) => warning.message),
  };
}
