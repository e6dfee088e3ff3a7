import type { BundleValidationReport, IssueReport, ValidateReport } from "@distributor/publish";
import type { CommandOutcome } from "../../command.js";
import { summaryLine } from "../../render/text.js";

/** `validate`: one line per bundle and a summary; every problem goes to stderr in text mode. */
export function validateOutcome(report: ValidateReport): CommandOutcome {
  const invalid = report.bundles.filter((bundle) => !bundle.ok).length;
  const text = [
    ...report.bundles.map(bundleLine),
    summaryLine("Validate", [
      ["location", report.location],
      ...(report.pipeline_id === undefined ? [] : ([["pipeline", report.pipeline_id]] as const)),
      ["bundles", report.bundles.length],
      ["invalid", invalid],
      ["status", report.ok ? "valid" : "invalid"],
    ]),
  ];
  const warnings = report.bundles.flatMap((bundle) =>
    bundle.warnings.map((warning) => `bundle ${bundle.path}: ${warning.message}`),
  );
  return { ...bundlesOutcome(report, text), warnings };
}

/**
 * The outcome of a bundle report (`validate` or `inspect`): its lines on stdout and, when it
 * failed, one stderr line per problem and the envelope error.
 */
export function bundlesOutcome(
  report: {
    ok: boolean;
    issues: readonly IssueReport[];
    bundles: Parameters<typeof bundleProblems>[1];
  },
  text: string[],
): CommandOutcome {
  if (report.ok) return { ok: true, result: report, text };
  const problems = bundleProblems(report.issues, report.bundles);
  const shown = problems.slice(0, MAX_PRINTED_PROBLEMS).map((p) => p.line);
  if (problems.length > shown.length) shown.push(`... and ${problems.length - shown.length} more`);
  return { ok: false, result: report, text, error: issuesFailure(problems), diagnostics: shown };
}

/** Problems printed on stderr in text mode; JSON carries every one. */
const MAX_PRINTED_PROBLEMS = 20;

function bundleLine(bundle: BundleValidationReport): string {
  return summaryLine("Bundle", [
    ["path", bundle.path],
    ["id", bundle.id],
    ["created", bundle.created],
    ["digest", bundle.digest],
    ["files", bundle.files],
    ["total_size", bundle.total_size],
    ["status", bundle.ok ? "valid" : "invalid"],
  ]);
}

interface Problem {
  code: string;
  /** The issue message, prefixed with the bundle it concerns. */
  line: string;
}

/** Every issue of a tree of bundles, each naming its bundle. */
function bundleProblems(
  treeIssues: readonly IssueReport[],
  bundles: ReadonlyArray<{ path: string; issues: readonly IssueReport[] }>,
): Problem[] {
  return [
    ...treeIssues.map((issue) => ({ code: issue.code, line: issue.message })),
    ...bundles.flatMap((bundle) =>
      bundle.issues.map((issue) => ({
        code: issue.code,
        line: `bundle ${bundle.path}: ${issue.message}`,
      })),
    ),
  ];
}

/** The envelope error for failed bundles: a lone problem keeps its own code. */
function issuesFailure(problems: readonly Problem[]): { code: string; message: string } {
  const [first] = problems;
  if (first === undefined) return { code: "bundle_invalid", message: "bundle validation failed" };
  if (problems.length === 1) return { code: first.code, message: first.line };
  const shown = problems.slice(0, 3).map((problem) => problem.line);
  const more = problems.length > shown.length ? `; and ${problems.length - shown.length} more` : "";
  return {
    code: "bundle_invalid",
    message: `${problems.length} problems: ${shown.join("; ")}${more}`,
  };
}
