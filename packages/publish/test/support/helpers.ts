import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildManifest, fileDigest } from "@distributor/bundle";
import {
  allManagedOutputPaths,
  isSharedRootState,
  managedOutputPaths,
  type OwnerScope,
  parseDocument,
  type StateDocument,
  serializeDocument,
} from "@distributor/state";
import {
  createLocalBackend,
  STATE_FILE_NAME,
  type StorageBackend,
  StorageError,
  type StorageOperation,
} from "@distributor/storage";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { parseConfig } from "../../src/config/index.js";
import type { Config } from "../../src/config/types.js";

export const REPORT = "# Report\nSunny.\n";
export const SUMMARY = "Summary\n";
/** The source bundle recorded by the maintenance fixtures: report.md and summary.txt. */
export const SOURCE_MANIFEST = buildManifest({
  id: "reports.example.2026-05-30",
  created: new Date("2026-05-30T11:00:00Z"),
  files: [
    { path: "report.md", ...fileDigest(REPORT) },
    { path: "summary.txt", ...fileDigest(SUMMARY) },
  ],
});
/** The configured destination of `DestinationFixture`, and a second owner of a shared root. */
export const ARCHIVE_OWNER: OwnerScope = { pipelineId: "reports", destinationId: "archive" };
export const HTML_OWNER: OwnerScope = { pipelineId: "reports", destinationId: "html" };

/** Writes `files` (relative path → text) below `directory`, creating parent directories. */
export async function writeFiles(directory: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    const target = join(directory, path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

/**
 * A temporary destination root for the maintenance workflows (`reconcile-state`, `prune`),
 * configured as destination `archive` of pipeline `reports`.
 */
export class DestinationFixture {
  private constructor(
    /** Temporary directory holding the destination root; removed by `remove`. */
    readonly workspace: string,
    /** The destination root directory. */
    readonly root: string,
  ) {}

  static async create(prefix: string): Promise<DestinationFixture> {
    const workspace = await mkdtemp(join(tmpdir(), prefix));
    const fixture = new DestinationFixture(workspace, join(workspace, "destination"));
    await mkdir(fixture.root);
    return fixture;
  }

  remove(): Promise<void> {
    return rm(this.workspace, { recursive: true, force: true });
  }

  writeFiles(files: Record<string, string>): Promise<void> {
    return writeFiles(this.root, files);
  }

  /** Writes the state file and a file for every recorded output; returns the state text. */
  async writeDestination(
    document: StateDocument,
    content: string | ((path: string) => string) = "managed",
  ): Promise<string> {
    const text = serializeDocument(document);
    const contentOf = typeof content === "string" ? () => content : content;
    await this.writeFiles({
      [STATE_FILE_NAME]: text,
      ...Object.fromEntries(
        document.outputs.map((output) => [output.path, contentOf(output.path)]),
      ),
    });
    return text;
  }

  stateText(): Promise<string> {
    return this.fileText(STATE_FILE_NAME);
  }

  async readState(): Promise<StateDocument> {
    return parseDocument(await this.stateText());
  }

  fileText(path: string): Promise<string> {
    return readFile(join(this.root, path), "utf8");
  }

  exists(path: string): Promise<boolean> {
    return stat(join(this.root, path)).then(
      () => true,
      () => false,
    );
  }

  /** Configuration of pipeline `reports` with destination `archive` at this root. */
  config(stateMode = "single_owner", destinationYaml = ""): Config {
    const yaml = `
pipelines:
  - id: reports
    source:
      backend: local
      path: ${JSON.stringify(join(this.workspace, "source"))}
    destinations:
      - id: archive
        backend: local
        path: ${JSON.stringify(this.root)}
        state:
          mode: ${stateMode}
${destinationYaml}
`;
    return parseConfig(yaml, { cwd: this.workspace });
  }
}

/** The paths of report records, comma-separated, for compact assertions. */
export const paths = (records: ReadonlyArray<{ path: string }>): string =>
  records.map((record) => record.path).join(",");

/** The output paths a state document records, comma-separated. */
export function recordedPaths(document: StateDocument): string {
  return (
    isSharedRootState(document) ? allManagedOutputPaths(document) : managedOutputPaths(document)
  ).join(",");
}

/** A `permission` failure, as an injected fault reports it. */
export function injectedFailure(operation: StorageOperation, path: string): StorageError {
  return new StorageError({ kind: "permission", operation, backend: "fake", path });
}

/**
 * A registry whose `local` backend has some methods replaced, for injecting faults only; every
 * other method is the real local backend's.
 */
export function faultyLocalRegistry(
  faults: (inner: StorageBackend) => Partial<StorageBackend>,
): BackendRegistry {
  return {
    local: async (location) => {
      const inner = createLocalBackend({ root: location.path });
      const overrides = faults(inner);
      return new Proxy(inner, {
        get(target, property, receiver) {
          if (Object.hasOwn(overrides, property)) return Reflect.get(overrides, property);
          const value = Reflect.get(target, property, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    },
  };
}
