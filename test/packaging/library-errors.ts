import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * What a plain-JavaScript program gets from the installed packages when it passes options that
 * are missing or malformed: one `ConfigError` (code `config_invalid`) naming every such key, at
 * once, instead of a `TypeError` or a storage failure later; and storage failures that name the
 * whole location. Registered by packed.test.ts, which installs the tarballs into `project()`.
 */
export function describeLibraryErrors(
  project: () => string,
  node: (script: string) => Promise<string>,
): void {
  /** Runs `body` (an async function body) in the installed project; returns what it returns. */
  async function inProject(name: string, body: string): Promise<unknown> {
    const script = join(project(), `${name}.mjs`);
    await writeFile(
      script,
      `import { errorCode, isConfigError, parseConfig, run, ConfigError } from "@distributor/publish";
import { openS3Location } from "@distributor/storage-s3";
import { openSshLocation } from "@distributor/storage-ssh";
import * as storage from "@distributor/storage";
const failure = async (make) => {
  try {
    await make();
    return "resolved";
  } catch (error) {
    return {
      name: error.name,
      code: error.code ?? null,
      errorCode: errorCode(error),
      isConfigError: isConfigError(error),
      sameClass: error instanceof ConfigError && error instanceof storage.ConfigError,
      message: error.message,
      issues: error.issues ?? null,
      kind: error.kind ?? null,
    };
  }
};
const result = await (async () => {
${body}
})();
console.log(JSON.stringify(result));
`,
    );
    return JSON.parse(await node(script));
  }

  describe("library errors of the installed packages", () => {
    it("openS3Location refuses an empty or malformed location with one ConfigError", async () => {
      const result = (await inProject(
        "s3-location",
        `return {
  empty: await failure(() => openS3Location({}, {})),
  malformed: await failure(() =>
    openS3Location({ bucket: "reports/2026", prefix: "/daily", endpoint: "ftp://s3.internal",
      credentials: { accessKeyIdEnv: "KEY" }, timeouts: { connectMs: 0 } }, {})),
  notAnObject: await failure(() => openS3Location(null, {})),
};`,
      )) as Record<string, Record<string, unknown>>;

      expect(result.empty).toEqual({
        name: "ConfigError",
        code: "config_invalid",
        errorCode: "config_invalid",
        isConfigError: true,
        sameClass: true,
        message: "s3 location: bucket is missing",
        issues: ["bucket is missing"],
        kind: null,
      });
      expect(result.malformed?.code).toBe("config_invalid");
      expect(result.malformed?.issues).toEqual([
        'bucket "reports/2026" is not a bucket name (1 to 255 characters, without / or whitespace)',
        'prefix "/daily" is not a relative path below the bucket: path is absolute',
        'endpoint must be an absolute http:// or https:// URL, not "ftp://s3.internal"',
        "credentials.secretAccessKeyEnv is missing",
        "timeouts.connectMs must be a positive integer, not 0",
      ]);
      expect(result.notAnObject?.message).toBe(
        "s3 location: the location must be an object, not null",
      );
    });

    it("openSshLocation names missing keys, a missing key file and the full location", async () => {
      const port = await closedPort();
      const result = (await inProject(
        "ssh-location",
        `const { writeFile } = await import("node:fs/promises");
const knownHosts = ${JSON.stringify(join(project(), "known_hosts"))};
await writeFile(knownHosts, "");
const location = { host: "127.0.0.1", port: ${port}, user: "publisher", path: "/srv/reports",
  knownHostsFile: knownHosts, timeouts: { connectMs: 2000 } };
return {
  empty: await failure(() => openSshLocation({}, {})),
  badPort: await failure(() => openSshLocation({ ...location, port: 70000, user: "" }, {})),
  missingKey: await failure(() =>
    openSshLocation({ ...location, privateKeyFile: "/nonexistent/id_ed25519" }, {})),
  refused: await failure(() =>
    openSshLocation({ ...location, passwordEnv: "SSH_PASSWORD" }, { env: { SSH_PASSWORD: "x" } })),
};`,
      )) as Record<string, Record<string, unknown>>;

      expect(result.empty).toMatchObject({
        name: "ConfigError",
        code: "config_invalid",
        isConfigError: true,
        issues: ["host is missing", "user is missing", "path is missing"],
      });
      expect(result.badPort?.issues).toEqual([
        "port must be an integer from 1 to 65535, not 70000",
        'user must be a non-empty string without surrounding spaces, not ""',
      ]);
      expect(result.missingKey).toMatchObject({
        name: "ConfigError",
        errorCode: "config_invalid",
        message: `ssh:publisher@127.0.0.1:${port}/srv/reports: privateKeyFile /nonexistent/id_ed25519 does not exist`,
      });
      // A connection that fails is a storage failure naming the whole location, not `ssh:.`.
      expect(result.refused).toMatchObject({ name: "StorageError", kind: "unavailable" });
      expect(result.refused?.message).toMatch(
        new RegExp(
          `^open backend ssh:publisher@127\\.0\\.0\\.1:${port}/srv/reports: cannot connect`,
        ),
      );
    });

    it("run and parseConfig refuse a malformed configuration object with a ConfigError", async () => {
      const result = (await inProject(
        "workflow-config",
        `return {
  runEmpty: await failure(() => run({})),
  runPipelines: await failure(() => run({ config: { pipelines: [{ id: "daily" }] } })),
  parseNull: await failure(() => parseConfig(null)),
};`,
      )) as Record<string, Record<string, unknown>>;

      expect(result.runEmpty).toMatchObject({
        name: "ConfigError",
        code: "config_invalid",
        message:
          "run options: config is missing: pass the configuration loadConfig or parseConfig returns",
      });
      expect(result.runPipelines?.issues).toEqual([
        "config.pipelines[0].source must be an object, not undefined",
        "config.pipelines[0].destinations must be an array, not undefined",
      ]);
      expect(result.parseNull).toMatchObject({
        name: "ConfigError",
        errorCode: "config_invalid",
        message: "config: the configuration must be YAML text (a string), not null",
      });
    });

    it("run reports a local source directory that does not exist as source_not_found", async () => {
      const missing = join(project(), "outbox-that-does-not-exist");
      const result = await inProject(
        "source-not-found",
        `const config = parseConfig(${JSON.stringify(`pipelines:
  - id: daily
    source: {backend: local, path: ${missing}}
    destinations:
      - {id: site, backend: local, path: ${join(project(), "site")}}
`)});
const report = await run({ config });
return report.pipeline_errors;`,
      );

      expect(result).toEqual([
        {
          pipeline_id: "daily",
          code: "source_not_found",
          message: `source directory ${missing} does not exist`,
        },
      ]);
    });
  });
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}
