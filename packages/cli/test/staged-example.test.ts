import { cp, readlink } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { filesBelow, same } from "../src/testing/index.js";
import { resultOf, runCli, useTempDir, writeBundle } from "./helpers.js";

// examples/staged-releases.yml runs as its comment documents it, from a copy of the repository's
// examples directory: a run stages, promote --latest makes it live, and after a second staged
// publication promoted too, rollback --previous returns to the first.

const tmp = useTempDir();
const examples = fileURLToPath(new URL("../../../examples/", import.meta.url));

describe("examples/staged-releases.yml", () => {
  it("stages, promotes and rolls back as documented", async () => {
    const cwd = tmp();
    await cp(join(examples, "static-site"), join(cwd, "examples/static-site"), { recursive: true });
    await cp(join(examples, "staged-releases.yml"), join(cwd, "examples/staged-releases.yml"));
    const config = "examples/staged-releases.yml";
    const owner = ["--config", config, "--pipeline", "site", "--destination", "www"];
    const root = join(cwd, "workspace/published/staged-site");

    const staged = await runCli(["run", "--config", config], { cwd });
    expect(staged.code, staged.stderr).toBe(0);
    const id = / release=(\S+) /.exec(staged.stdout)?.[1] as string;
    expect(staged.stdout).toContain(
      ` status=staged outputs=7 primary_url=- release=${id} preview_url=https://preview.example.org/${id}/`,
    );
    await expect(readlink(join(root, "current"))).rejects.toThrow();
    const shown = await runCli(["inspect", ...owner], { cwd });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`Release: id=${id} status=staged`);

    const promoted = await runCli(["promote", ...owner, "--latest"], { cwd });
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(promoted.stdout).toContain(` to=${id} status=switched`);
    expect(await readlink(join(root, "current"))).toBe(`releases/${id}`);

    // A second publication, staged and promoted; rollback --previous returns to the first.
    await writeBundle(
      join(cwd, "examples/static-site"),
      "site.example.2030-01-01",
      "2030-01-01T00:00:00Z",
      {
        "index.html": "<h1>next</h1>\n",
      },
    );
    const next = await runCli(["run", "--config", config, "--format", "json"], { cwd });
    const [action] = resultOf(next).actions as Array<{ status: string; release_id: string }>;
    expect(action?.status).toBe("staged");
    expect(await readlink(join(root, "current"))).toBe(`releases/${id}`);
    expect((await runCli(["promote", ...owner, "--latest"], { cwd })).code).toBe(0);
    expect(await readlink(join(root, "current"))).toBe(`releases/${action?.release_id}`);
    const back = await runCli(["rollback", ...owner, "--previous"], { cwd });
    expect(back.code, back.stderr).toBe(0);
    expect(await readlink(join(root, "current"))).toBe(`releases/${id}`);
    expect(
      same(await filesBelow(join(root, "current")), await filesBelow(join(root, "releases", id))),
    ).toBe(true);
  }, 120_000);
});
