import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url));
// The workspace's own turbo, so the suites need neither pnpm nor a global install on the PATH.
const turbo = join(repositoryRoot, "node_modules", ".bin", "turbo");

/**
 * The suites run the built `distributor` (`dist/bin.cjs`) and the library guide's programs load
 * the built packages, so every package this one depends on must match its sources. Turbo rebuilds
 * only what changed; after the root `pnpm test` build this is a cache hit.
 */
export default async function setup(): Promise<void> {
  try {
    await promisify(execFile)(
      turbo,
      ["run", "build", "--filter=@distributor/e2e...", "--output-logs=errors-only"],
      { cwd: repositoryRoot, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`building the packages the end-to-end suites run failed:\n${stdout}${stderr}`);
  }
}
