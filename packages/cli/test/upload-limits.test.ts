import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, runCli, startServe, useTempDir, writeBundle } from "./helpers.js";

// `distributor upload` of a bundle with more files than the pipelines' default limit, to a real
// `distributor serve` whose pipeline accepts them: the producer's own limit is the one it can
// raise, and a refusal names that, never the server's configuration.

const TOKEN = "limits-test-token-value";
const FILES = 15_000;
const tempDir = useTempDir();

function configText(dir: string): string {
  return `server:
  http:
    listen: 127.0.0.1:0
upload_tokens:
  - {id: producer, token_env: PRODUCER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    validation: {max_files: 20000}
    destinations:
      - {id: site, backend: local, path: ${join(dir, "site")}}
`;
}

describe("distributor upload of a 15 000-file bundle to a serve whose pipeline allows 20 000", () => {
  it("is refused before sending without --max-files, naming the flag; with --max-files 20000 it is published", async () => {
    const dir = tempDir();
    const config = join(dir, "distributor.yml");
    await writeFile(config, configText(dir));
    const bundle = join(dir, "bundle");
    const files: Record<string, string> = {};
    for (let index = 0; index < FILES; index++) files[`pages/${index}.md`] = `# ${index}\n`;
    await writeBundle(bundle, "reports.large", "2026-12-01T00:00:00Z", files);

    const serving = await startServe(config, {
      cwd: dir,
      env: { PRODUCER_TOKEN: TOKEN, XDG_STATE_HOME: join(dir, "state") },
    });
    try {
      const upload = (...flags: string[]) =>
        runCli(
          [
            "upload",
            "--server",
            serving.url,
            "--pipeline",
            "reports",
            "--token-env",
            "PRODUCER_TOKEN",
            "--format",
            "json",
            ...flags,
            bundle,
          ],
          { env: { PRODUCER_TOKEN: TOKEN } },
        );

      const refused = await upload();
      expect(refused.code, refused.stderr).not.toBe(0);
      const refusal = envelopeOf(refused).error;
      expect(refusal?.code).toBe("bundle_invalid");
      expect(refusal?.message).toContain(
        `manifest.json: lists ${FILES} files, more than --max-files 10000; pass --max-files with as many files as the server's pipeline accepts (ask its operator)`,
      );
      expect(refusal?.message).not.toContain("validation.max_files");
      // Refused before a byte was sent: the server saw no upload.
      expect(serving.stderr()).not.toContain("/pipelines/reports/uploads");

      const sent = await upload("--max-files", "20000", "--wait");
      expect(sent.code, sent.stderr).toBe(0);
      expect(envelopeOf(sent).result).toMatchObject({
        pipeline_id: "reports",
        replayed: false,
        run: { status: "succeeded" },
      });
    } finally {
      serving.child.kill("SIGTERM");
      await serving.exited;
    }
    const published = await readdir(join(dir, "site", "pages"));
    expect(published.length).toBe(FILES);
    expect(await readFile(join(dir, "site", "pages", "14999.md"), "utf8")).toBe("# 14999\n");
  }, 180_000);

  it("refuses a --max-files that is not a whole number greater than zero", async () => {
    const result = await runCli(
      [
        "upload",
        "--server",
        "http://127.0.0.1:9",
        "--pipeline",
        "reports",
        "--max-files",
        "0",
        ".",
      ],
      { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'upload --max-files must be a whole number of files greater than zero (such as 200000), got "0"',
    );
  });
});
