import { describe, expect, it } from "vitest";
import { runCli } from "./helpers.js";

const selector = ["--config", "config.yml", "--pipeline", "reports", "--destination", "archive"];

/** Command lines that must fail as usage errors, and what the message must say. */
const usageErrors: ReadonlyArray<readonly [string, readonly string[], string]> = [
  ["unknown command", ["publish"], 'unknown command "publish"'],
  ["unknown flag", ["validate", "--bogus", "bundle"], "unknown flag --bogus"],
  ["unknown short flag", ["validate", "-x", "bundle"], "unknown flag -x"],
  ["unknown top-level flag", ["--verbose"], "unknown flag --verbose"],
  ["negated flag", ["run", "--no-force"], "unknown flag --no-force"],
  ["help for an unknown command", ["help", "publish"], 'unknown command "publish"'],
  [
    "switch with a value",
    ["run", "--dry-run=maybe"],
    '--dry-run takes no value, got "--dry-run=maybe"',
  ],
  ["format xml", ["version", "--format", "xml"], "format must be text or json"],
  ["format without value", ["version", "--format"], "format must be text or json"],
  ["version positional", ["version", "extra"], "version does not accept positional arguments"],

  ["run positional", ["run", "extra"], "run does not accept positional arguments"],
  ["run format", ["run", "--format", "xml"], "format must be text or json"],
  [
    "run config twice",
    ["run", "--config", "a.yml", "--config", "b.yml"],
    "--config may be given only once",
  ],
  ["run config without value", ["run", "--config"], "--config requires a value"],
  ["run pipeline without value", ["run", "--pipeline"], "--pipeline requires a value"],

  ["validate without path", ["validate"], "validate requires a path or --config"],
  ["validate two paths", ["validate", "a", "b"], "validate accepts one path"],
  [
    "validate path and config",
    ["validate", "bundle", "--config", "c.yml"],
    "validate accepts a path or --config, not both",
  ],
  [
    "validate path and pipeline",
    ["validate", "bundle", "--pipeline", "reports"],
    "validate accepts a path or --config, not both",
  ],
  [
    "validate pipeline without config",
    ["validate", "--pipeline", "reports"],
    "validate requires --config",
  ],
  ["validate bundle without config", ["validate", "--bundle", "x"], "validate requires --config"],
  [
    "validate config without pipeline",
    ["validate", "--config", "c.yml"],
    "validate requires --pipeline",
  ],
  ["validate format", ["validate", "bundle", "--format", "xml"], "format must be text or json"],

  ["inspect without path", ["inspect"], "inspect requires a path or --config"],
  ["inspect two paths", ["inspect", "a", "b"], "inspect accepts one path"],
  [
    "inspect path and config",
    ["inspect", "dir", "--config", "c.yml", "--pipeline", "reports"],
    "inspect accepts a path or --config, not both",
  ],
  [
    "inspect bundle and destination",
    [
      "inspect",
      "--config",
      "c.yml",
      "--pipeline",
      "reports",
      "--bundle",
      "b",
      "--destination",
      "archive",
    ],
    "inspect accepts --bundle or --destination, not both",
  ],
  [
    "inspect destination without config",
    ["inspect", "--destination", "archive"],
    "inspect requires --config",
  ],
  [
    "inspect config without pipeline",
    ["inspect", "--config", "c.yml", "--destination", "archive"],
    "inspect requires --pipeline",
  ],
  ["inspect format", ["inspect", "dir", "--format", "yaml"], "format must be text or json"],

  ["manifest without subcommand", ["manifest"], "manifest requires a subcommand: create"],
  [
    "manifest unknown subcommand",
    ["manifest", "delete", "dir"],
    'unknown command "manifest delete"',
  ],
  ["manifest create without id", ["manifest", "create", "dir"], "manifest create requires --id"],
  [
    "manifest create without path",
    ["manifest", "create", "--id", "x"],
    "manifest create requires a bundle path",
  ],
  [
    "manifest create two paths",
    ["manifest", "create", "--id", "x", "a", "b"],
    "manifest create accepts one bundle path",
  ],
  [
    "manifest create format",
    ["manifest", "create", "--id", "x", "dir", "--format", "xml"],
    "format must be text or json",
  ],

  [
    "reconcile-state without config",
    ["reconcile-state", "--pipeline", "reports", "--destination", "archive"],
    "reconcile-state requires --config",
  ],
  [
    "reconcile-state without pipeline",
    ["reconcile-state", "--config", "c.yml", "--destination", "archive"],
    "reconcile-state requires --pipeline",
  ],
  [
    "reconcile-state without destination",
    ["reconcile-state", "--config", "c.yml", "--pipeline", "reports"],
    "reconcile-state requires --destination",
  ],
  [
    "reconcile-state format",
    ["reconcile-state", ...selector, "--format", "xml"],
    "format must be text or json",
  ],
  [
    "reconcile-state positional",
    ["reconcile-state", ...selector, "extra"],
    "reconcile-state does not accept positional arguments",
  ],
  ["reconcile-state apply", ["reconcile-state", ...selector, "--apply"], "unknown flag --apply"],

  [
    "prune without config",
    ["prune", "--pipeline", "reports", "--destination", "archive", "--dry-run"],
    "prune requires --config",
  ],
  [
    "prune without pipeline",
    ["prune", "--config", "c.yml", "--destination", "archive", "--dry-run"],
    "prune requires --pipeline",
  ],
  [
    "prune without destination",
    ["prune", "--config", "c.yml", "--pipeline", "reports", "--dry-run"],
    "prune requires --destination",
  ],
  [
    "prune without mode",
    ["prune", ...selector],
    "prune requires exactly one of --dry-run or --apply",
  ],
  [
    "prune with both modes",
    ["prune", ...selector, "--dry-run", "--apply"],
    "prune requires exactly one of --dry-run or --apply",
  ],
  [
    "prune format",
    ["prune", ...selector, "--dry-run", "--format", "xml"],
    "format must be text or json",
  ],
  [
    "prune positional",
    ["prune", ...selector, "--dry-run", "extra"],
    "prune does not accept positional arguments",
  ],
  [
    "prune all-owners",
    ["prune", ...selector, "--dry-run", "--all-owners"],
    "unknown flag --all-owners",
  ],
];

describe("usage errors", () => {
  it.concurrent.each(usageErrors)("%s: exit 2, nothing on stdout", async (_name, args, message) => {
    const result = await runCli(args);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^distributor: /);
    expect(result.stderr).toContain(message);
    expect(result.stderr.trimEnd().split("\n")).toHaveLength(1);
  });

  it.concurrent.each([
    ["prune", ["prune", "--pipeline", "reports", "--destination", "archive", "--dry-run"]],
    ["validate", ["validate", "a", "b"]],
    ["manifest create", ["manifest", "create", "dir"]],
  ] as const)("%s prints no JSON for a usage error under --format json", async (_name, args) => {
    const result = await runCli([...args, "--format", "json"]);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
  });

  it("reports the positional check before the format check, as the reference does", async () => {
    const result = await runCli(["prune", ...selector, "--dry-run", "--format", "xml", "extra"]);

    expect(result.code).toBe(2);
    expect(result.stderr).toBe("distributor: prune does not accept positional arguments\n");
  });
});
