import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  runCli,
  singlePipelineConfig,
  snapshotTree,
  useTempDir,
  writeSpecBundle,
} from "./helpers.js";

// Metadata rules need a destination that stores object metadata (S3; checked against Ceph RGW in
// packages/storage-s3/test/metadata.test.ts). On a local destination they are a configuration
// error naming the destination, and nothing is written.
describe("run with metadata rules on a local destination", () => {
  const dir = useTempDir();

  it("refuses the configuration, naming the destination, and writes nothing", async () => {
    const source = join(dir(), "source");
    const destination = join(dir(), "published");
    await writeSpecBundle(source);
    const config = join(dir(), "distributor.yml");
    await writeFile(
      config,
      singlePipelineConfig(
        source,
        destination,
        `        metadata:\n          - {match: "**/*.md", cache_control: "max-age=60"}\n`,
      ),
    );

    const result = await runCli(["run", "--config", config, "--format", "json"]);

    expect(result.code).toBe(1);
    expect(envelopeOf(result).error?.message).toContain(
      "pipelines[0].destinations[0].metadata cannot be used by destination archive: its local backend cannot store object metadata",
    );
    expect(await snapshotTree(destination)).toEqual([]);
  });
});
