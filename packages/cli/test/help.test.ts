import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { envelopeOf, runCli } from "./helpers.js";

/** Every command, the words that invoke it, and every flag its help must describe (docs/cli.md). */
const commands: ReadonlyArray<readonly [string, readonly string[], readonly string[]]> = [
  ["version", ["version"], ["--format"]],
  ["run", ["run"], ["--config", "--pipeline", "--dry-run", "--force", "--quiet", "--format"]],
  ["validate", ["validate"], ["--config", "--pipeline", "--bundle", "--format"]],
  ["inspect", ["inspect"], ["--config", "--pipeline", "--bundle", "--destination", "--format"]],
  ["manifest create", ["manifest", "create"], ["--id", "--created", "--force", "--format"]],
  [
    "reconcile-state",
    ["reconcile-state"],
    ["--config", "--pipeline", "--destination", "--all-owners", "--dry-run", "--format"],
  ],
  [
    "prune",
    ["prune"],
    ["--config", "--pipeline", "--destination", "--dry-run", "--apply", "--format"],
  ],
  [
    "upload",
    ["upload"],
    ["--server", "--pipeline", "--token-env", "--idempotency-key", "--wait", "--format"],
  ],
];

describe("help", () => {
  it("lists every command", async () => {
    const result = await runCli(["--help"]);

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    for (const name of [
      "help",
      "version",
      "run",
      "validate",
      "inspect",
      "manifest",
      "reconcile-state",
      "prune",
      "upload",
    ]) {
      expect(result.stdout).toContain(`distributor ${name}`);
    }
    expect(result.stdout).toContain("2 usage error");
  });

  it("prints the same overview for bare distributor and distributor help", async () => {
    const [bare, help, flag] = await Promise.all([
      runCli([]),
      runCli(["help"]),
      runCli(["--help"]),
    ]);

    expect(bare.code).toBe(0);
    expect(help.code).toBe(0);
    expect(bare.stdout).toBe(flag.stdout);
    expect(help.stdout).toBe(flag.stdout);
  });

  it.concurrent.each(commands)("%s --help describes every flag", async (name, words, flags) => {
    const result = await runCli([...words, "--help"]);

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toContain(`distributor ${name}`);
    const options = result.stdout.slice(result.stdout.indexOf("Options:"));
    for (const flag of flags) {
      // The flag and a description on the same line.
      expect(options).toMatch(new RegExp(`^\\s+${flag}\\s+\\S.*$`, "m"));
    }
  });

  it.concurrent.each(commands)("help %s matches %s --help", async (_name, words) => {
    const [viaHelp, viaFlag] = await Promise.all([
      runCli(["help", ...words]),
      runCli([...words, "--help"]),
    ]);

    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toBe(viaFlag.stdout);
  });

  it("shows the synopsis of a command as docs/cli.md gives it, with the lease wait", async () => {
    const result = await runCli(["prune", "--help"]);

    expect(result.stdout).toContain(
      "distributor prune --config <path> --pipeline <id> --destination <id> (--dry-run|--apply) [--lock-timeout <duration>] [--format text|json]",
    );
  });

  it.concurrent.each([
    ["prune", "--help", "--format", "xml"],
    ["prune", "--dry-run=maybe", "--help"],
    ["prune", "--bogus", "--help"],
  ])("answers %j before checking the other flags", async (...args) => {
    const result = await runCli(args);

    expect(result.code).toBe(0);
    expect(result.stdout).toContain("--apply");
  });
});

describe("version", () => {
  const packageVersion = async () =>
    (
      JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as {
        version: string;
      }
    ).version;

  it("prints the name and the CLI package version", async () => {
    const result = await runCli(["version"]);

    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`distributor ${await packageVersion()}\n`);
    expect(result.stderr).toBe("");
  });

  it("prints the JSON envelope", async () => {
    const result = await runCli(["version", "--format", "json"]);

    expect(result.code).toBe(0);
    expect(envelopeOf(result)).toEqual({
      command: "version",
      ok: true,
      result: { name: "distributor", version: await packageVersion() },
    });
    expect(result.stdout.endsWith("}\n")).toBe(true);
  });

  it("answers --version like the version command", async () => {
    const result = await runCli(["--version"]);

    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`distributor ${await packageVersion()}\n`);
    expect(result.stderr).toBe("");
  });

  it("takes --version only before a command", async () => {
    const result = await runCli(["run", "--version"]);

    expect(result.code).toBe(2);
    expect(result.stderr).toBe("distributor: unknown flag --version\n");
  });

  it("accepts --format=text", async () => {
    const result = await runCli(["version", "--format=text"]);

    expect(result.stdout).toBe(`distributor ${await packageVersion()}\n`);
  });
});
