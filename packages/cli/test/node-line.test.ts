import { createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../src/main.js";
import { nodeLineNotice } from "../src/node-line.js";
import { runCli, useTempDir, writeConfig, writeFiles, writeSpecBundle } from "./helpers.js";

const tmp = useTempDir();
const onNode20 = process.versions.node.startsWith("20.");

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

async function s3Config(): Promise<string> {
  const source = join(tmp(), "src");
  await writeSpecBundle(join(source, "daily"));
  const port = await closedPort();
  const path = join(tmp(), "distributor.yml");
  await writeFiles(tmp(), {
    "distributor.yml": `pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - id: bucket
        backend: s3
        bucket: reports-bucket
        endpoint: http://127.0.0.1:${port}
        force_path_style: true
        credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}
        timeouts: {connect: 2s, request: 2s}
`,
  });
  return path;
}

describe("what the CLI says about the Node.js line", () => {
  it("names Node 20 as past its end of life, when, and the lines that work, in one line", () => {
    expect(nodeLineNotice("20.20.2")).toBe(
      "note: Node.js 20.20.2 is past its end of life (April 2026); distributor supports Node.js 22, 24 and 26 (the active LTS), and releases after January 2027 need one of them, as the AWS SDK does",
    );
    expect(nodeLineNotice("v20.19.0")).toContain(
      "Node.js 20.19.0 is past its end of life (April 2026); distributor supports Node.js 22, 24 and 26",
    );
    expect(nodeLineNotice("21.7.3")).toContain(
      "Node.js 21.7.3 is past its end of life (June 2024)",
    );
    expect(nodeLineNotice("17.9.1")).toContain("Node.js 17.9.1 is past its end of life; ");
    for (const version of ["22.12.0", "24.1.0", "25.0.0", "26.10.0", "v26.0.0"]) {
      expect(nodeLineNotice(version)).toBeUndefined();
    }
  });

  it("never shows the AWS SDK's warning; on Node 20 an S3 run ends with one line of its own", async () => {
    const configPath = await s3Config();
    const env = {
      TEST_S3_KEY: "key",
      TEST_S3_SECRET: "secret",
      // As an operator's shell has it: the test runner's setting must not hide the warning.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: undefined,
    };
    const result = await runCli(["run", "--config", configPath], { env });

    expect(result.code).toBe(1);
    expect(result.stderr).not.toContain("NodeVersionSupportWarning");
    expect(result.stderr).not.toContain("AWS SDK for JavaScript");
    const lines = result.stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^distributor: pipeline reports destination bucket bundle daily: /);
    if (onNode20) {
      expect(lines).toHaveLength(2);
      expect(lines[1]).toBe(`distributor: ${nodeLineNotice(process.versions.node)}`);
    } else {
      expect(lines).toHaveLength(1);
    }
    // JSON mode: the envelope alone on stdout, the same notice on stderr.
    const json = await runCli(["run", "--config", configPath, "--format", "json"], { env });
    expect(JSON.parse(json.stdout).error.code).toBe("destination_failed");
    expect(json.stderr).toBe(
      onNode20 ? `distributor: ${nodeLineNotice(process.versions.node)}\n` : "",
    );
  });

  it("prints nothing extra for a run that opens no S3 location", async () => {
    const source = join(tmp(), "src");
    await writeSpecBundle(join(source, "daily"));
    const configPath = await writeConfig(tmp(), source, join(tmp(), "dest"));
    const result = await runCli(["run", "--config", configPath], {
      env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: undefined },
    });

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/action=publish_new status=published/);
  });

  it("decides by the Node version it is given, once per command", async () => {
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
    const configPath = await s3Config();
    const run = async (nodeVersion: string) => {
      let stderr = "";
      await main(["run", "--config", configPath, "--format", "json"], {
        stdout: { write: () => true },
        stderr: { write: (chunk: string) => (stderr += chunk) },
        env: { TEST_S3_KEY: "key", TEST_S3_SECRET: "secret" },
        nodeVersion,
      });
      return stderr;
    };
    process.env.TEST_S3_KEY = "key";
    process.env.TEST_S3_SECRET = "secret";
    expect(await run("20.19.0")).toBe(`distributor: ${nodeLineNotice("20.19.0")}\n`);
    expect(await run("22.12.0")).toBe("");
    expect(await run("26.10.0")).toBe("");
  });
});
