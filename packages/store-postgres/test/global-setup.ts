import type { TestProject } from "vitest/node";
import { startPostgres } from "../src/testing/index.js";

declare module "vitest" {
  interface ProvidedContext {
    /** The throwaway server's superuser URL; `null` when it could not start here. */
    postgresUrl: string | null;
  }
}

/** True under CI, where a missing PostgreSQL must fail the suite instead of skipping it. */
export function postgresRequired(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
}

/** Starts one real PostgreSQL on loopback for the whole suite and stops it afterwards. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: Awaited<ReturnType<typeof startPostgres>>;
  try {
    server = await startPostgres();
  } catch (error) {
    if (postgresRequired()) {
      throw new Error(
        `the PostgreSQL store suite needs PostgreSQL under CI: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    console.warn(`PostgreSQL store tests skipped: ${(error as Error).message}`);
    project.provide("postgresUrl", null);
    return async () => undefined;
  }
  project.provide("postgresUrl", server.url);
  return () => server.stop();
}
