import { execFile } from "node:child_process";
import { access } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const repositoryRoot = fileURLToPath(new URL("../../../", import.meta.url));
// The workspace's own turbo, so the suite needs neither pnpm nor a global install on the PATH.
const turbo = join(repositoryRoot, "node_modules", ".bin", "turbo");
const bin = fileURLToPath(new URL("../dist/bin.cjs", import.meta.url));

/**
 * The CLI suites run the real `dist/bin.cjs`, so it must match the sources. Turbo rebuilds the CLI
 * and its dependencies only when their inputs changed; after the root `pnpm test` build this is a
 * cache hit.
 */
export default async function setup(): Promise<void> {
  try {
    await promisify(execFile)(
      turbo,
      ["run", "build", "--filter=@distributor/cli...", "--output-logs=errors-only"],
      { cwd: repositoryRoot, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`building @distributor/cli for its tests failed:\n${stdout}${stderr}`);
  }
  try {
    await access(bin);
  } catch {
    throw new Error(`${bin} is missing after the build; run \`pnpm build\` and look for errors`);
  }
}
