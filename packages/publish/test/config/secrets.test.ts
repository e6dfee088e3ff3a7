import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig, resolveSecret, SecretError } from "../../src/config/index.js";

async function failure(promise: Promise<unknown>): Promise<SecretError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof SecretError))
    throw new Error(`expected a SecretError, got ${String(error)}`);
  return error;
}

describe("resolveSecret", () => {
  let directory: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), "distributor-secrets-"));
  });

  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it("reads the environment variable first", async () => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), "from-file\n");
    const value = await resolveSecret("UPLOAD_TOKEN", {
      env: { UPLOAD_TOKEN: "from-env\n" },
      secretsDirectory: directory,
    });
    expect(value).toBe("from-env\n");
  });

  it("defaults to process.env", async () => {
    const name = `DISTRIBUTOR_TEST_SECRET_${process.pid}`;
    process.env[name] = "process-value";
    try {
      expect(await resolveSecret(name)).toBe("process-value");
    } finally {
      delete process.env[name];
    }
  });

  it.each([
    ["token\n", "token"],
    ["token\r\n", "token"],
    ["token", "token"],
    ["token\n\n", "token\n"],
    ["  spaced token  \n", "  spaced token  "],
  ])("reads the file %j without one trailing newline", async (content, expected) => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), content);
    expect(await resolveSecret("UPLOAD_TOKEN", { env: {}, secretsDirectory: directory })).toBe(
      expected,
    );
  });

  it("falls back to the file when the variable is empty", async () => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), "from-file\n");
    const value = await resolveSecret("UPLOAD_TOKEN", {
      env: { UPLOAD_TOKEN: "" },
      secretsDirectory: directory,
    });
    expect(value).toBe("from-file");
  });

  it("follows a symlinked secret file, as mounted secrets often are", async () => {
    await mkdir(join(directory, "..data"));
    await writeFile(join(directory, "..data", "S3_KEY"), "AKIA\n");
    await symlink(join("..data", "S3_KEY"), join(directory, "S3_KEY"));
    expect(await resolveSecret("S3_KEY", { env: {}, secretsDirectory: directory })).toBe("AKIA");
  });

  it("names a missing secret, the variable and the file", async () => {
    const error = await failure(
      resolveSecret("UPLOAD_TOKEN", { env: {}, secretsDirectory: directory }),
    );
    expect(error.reference).toBe("UPLOAD_TOKEN");
    expect(error.code).toBe("secret_unavailable");
    expect(error.message).toBe(
      `secret UPLOAD_TOKEN is not available: environment variable UPLOAD_TOKEN is not set and file ${join(directory, "UPLOAD_TOKEN")} does not exist`,
    );
  });

  it("names a missing secret when no secrets directory is configured", async () => {
    const error = await failure(resolveSecret("UPLOAD_TOKEN", { env: { UPLOAD_TOKEN: "" } }));
    expect(error.message).toBe(
      "secret UPLOAD_TOKEN is not available: environment variable UPLOAD_TOKEN is empty and no secrets.directory is configured",
    );
  });

  it("refuses an empty secret file", async () => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), "\n");
    const error = await failure(
      resolveSecret("UPLOAD_TOKEN", { env: {}, secretsDirectory: directory }),
    );
    expect(error.message).toBe(
      `secret UPLOAD_TOKEN is empty (file ${join(directory, "UPLOAD_TOKEN")})`,
    );
  });

  it("refuses a directory in place of the file", async () => {
    await mkdir(join(directory, "UPLOAD_TOKEN"));
    const error = await failure(
      resolveSecret("UPLOAD_TOKEN", { env: {}, secretsDirectory: directory }),
    );
    expect(error.message).toBe(
      `secret UPLOAD_TOKEN cannot be read: ${join(directory, "UPLOAD_TOKEN")} is not a regular file`,
    );
  });

  it("refuses a file too large to be a secret", async () => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), Buffer.alloc(64 * 1024 + 1, 0x61));
    const error = await failure(
      resolveSecret("UPLOAD_TOKEN", { env: {}, secretsDirectory: directory }),
    );
    expect(error.message).toMatch(/is larger than 65536 bytes$/);
  });

  it.each(["../UPLOAD_TOKEN", "a/b", "", "1TOKEN", "TOKEN-1"])(
    "refuses the reference name %j before any lookup",
    async (name) => {
      await writeFile(join(directory, "a"), "x");
      const error = await failure(
        resolveSecret(name, { env: { [name]: "value" }, secretsDirectory: directory }),
      );
      expect(error.message).toBe(`secret ${JSON.stringify(name)} is not a valid reference name`);
    },
  );

  it("stops when the signal is aborted", async () => {
    await writeFile(join(directory, "UPLOAD_TOKEN"), "x");
    const controller = new AbortController();
    controller.abort();
    await expect(
      resolveSecret("UPLOAD_TOKEN", {
        env: {},
        secretsDirectory: directory,
        signal: controller.signal,
      }),
    ).rejects.toMatchObject({ name: "AbortError" });
  });
});

describe("configuration loading and secrets", () => {
  it("does not resolve secret references while loading", () => {
    const config = parseConfig(
      `
secrets: {directory: /nonexistent/secrets}
upload_tokens: [{id: reporter, token_env: NOT_SET_ANYWHERE, allow_pipelines: [ingest]}]
pipelines:
  - id: ingest
    source: {backend: http_upload}
    destinations:
      - id: bucket
        backend: s3
        bucket: reports
        credentials: {access_key_id_env: ALSO_NOT_SET, secret_access_key_env: NOR_THIS}
`,
      { env: {} },
    );
    expect(config.uploadTokens[0]?.tokenEnv).toBe("NOT_SET_ANYWHERE");
    expect(config.secrets.directory).toBe("/nonexistent/secrets");
  });
});
