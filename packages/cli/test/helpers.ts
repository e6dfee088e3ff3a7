import { createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeFiles } from "../src/testing/index.js";

// What the CLI's suites share beyond `@distributor/cli/testing` (the process helpers, re-exported
// here): the fixtures of this folder, the spec's example bundle, local configurations, snapshots
// and `distributor serve`.
export {
  BIN,
  type CliResult,
  digestsBelow,
  digestsOf,
  envelopeOf,
  resultOf,
  runCli,
  type Serving,
  sha256Of,
  spawnCli,
  spawnUpload,
  startServe,
  useTempDir,
  writeBundle,
  writeFiles,
} from "../src/testing/index.js";

export const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

export const REPORT = "# Report\nSunny.\n";
export const REPORT_SHA256 =
  "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6";
/** The bundle digest of docs/design/bundles.md's example: `report.md` alone. */
export const EXAMPLE_BUNDLE_DIGEST =
  "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78";

/** Writes docs/design/bundles.md's example bundle (one file, literal manifest) into `directory`. */
export async function writeSpecBundle(directory: string, id = "reports.example.2026-06-04") {
  const manifest = {
    schema_version: 1,
    id,
    created: "2026-06-04T11:55:00Z",
    digest: EXAMPLE_BUNDLE_DIGEST,
    files: [{ path: "report.md", sha256: REPORT_SHA256, size: 16 }],
  };
  await writeFiles(directory, {
    "report.md": REPORT,
    "manifest.json": `${JSON.stringify(manifest, null, 2)}\n`,
  });
}

/** Copies a state fixture to `<directory>/.distributor.json`. */
export async function writeStateFixture(directory: string, name: string): Promise<void> {
  await mkdir(directory, { recursive: true });
  await writeFile(
    join(directory, ".distributor.json"),
    await readFile(join(FIXTURES, "state", name)),
  );
}

/**
 * Configuration text with one local pipeline `reports` and its local destination `archive`;
 * `extra` holds further destination keys, each line indented by eight spaces.
 */
export function singlePipelineConfig(source: string, destination: string, extra = ""): string {
  return `pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - id: archive
        backend: local
        path: ${destination}
${extra}`;
}

/** Writes `singlePipelineConfig` to `<directory>/distributor.yml` and returns its path. */
export async function writeConfig(directory: string, source: string, destination: string) {
  const path = join(directory, "distributor.yml");
  await writeFile(path, singlePipelineConfig(source, destination));
  return path;
}

/**
 * Every entry below `root` — directories, files with their bytes, symlinks with their targets —
 * with names read as raw bytes (shown as hex escapes where not UTF-8), so that a comparison of two
 * snapshots proves a tree byte- and entry-identical, empty directories and odd names included.
 */
export async function snapshotTree(root: string): Promise<string[]> {
  const lines: string[] = [];
  const visit = async (dir: Buffer, shown: string) => {
    let names: Buffer[];
    try {
      names = (await readdir(dir, { encoding: "buffer" })) as Buffer[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    for (const name of names.sort(Buffer.compare)) {
      const path = Buffer.concat([dir, Buffer.from("/"), name]);
      const label = `${shown}${[...name].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`)).join("")}`;
      const info = await lstat(path);
      if (info.isSymbolicLink()) lines.push(`l ${label} -> ${await readlink(path)}`);
      else if (info.isDirectory()) {
        lines.push(`d ${label}/`);
        await visit(path, `${label}/`);
      } else {
        const digest = createHash("sha256")
          .update(await readFile(path))
          .digest("hex");
        lines.push(`f ${label} ${digest.slice(0, 16)}`);
      }
    }
  };
  await visit(Buffer.from(root), "");
  return lines;
}
