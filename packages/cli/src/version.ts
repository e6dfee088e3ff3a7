import { readFile } from "node:fs/promises";

export interface PackageIdentity {
  name: string;
  version: string;
}

/** The CLI's own package.json, one directory above both `src/` and `dist/`. */
export async function cliPackage(): Promise<PackageIdentity> {
  const text = await readFile(new URL("../package.json", import.meta.url), "utf8");
  const parsed = JSON.parse(text) as { version?: unknown };
  if (typeof parsed.version !== "string")
    throw new Error("package.json of @distributor/cli has no version");
  return { name: "distributor", version: parsed.version };
}
