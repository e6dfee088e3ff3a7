import { writeFile } from "node:fs/promises";
import { join } from "node:path";
// The protocol test server of the client's own suite: the real server is tested end to end elsewhere.
import { WireServer } from "@distributor/upload-client/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type CliResult,
  EXAMPLE_BUNDLE_DIGEST,
  envelopeOf,
  resultOf,
  runCli,
  useTempDir,
  writeSpecBundle,
} from "./helpers.js";

const TOKEN = "s3cr3t-upload-token";
const BUNDLE_ID = "reports.example.2026-06-04";

describe("upload", () => {
  const dir = useTempDir();
  let server: WireServer;

  beforeEach(async () => {
    server = await WireServer.start({ tokens: { [TOKEN]: ["reports"] } });
  });
  afterEach(async () => {
    await server.close();
  });

  async function bundle(): Promise<string> {
    const path = join(dir(), "bundle");
    await writeSpecBundle(path, BUNDLE_ID);
    return path;
  }

  async function upload(
    args: readonly string[],
    env: NodeJS.ProcessEnv = { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN },
  ): Promise<CliResult> {
    const result = await runCli(["upload", "--server", server.url, ...args], { env });
    // Whatever happened, the token is never printed.
    expect(result.stdout).not.toContain(TOKEN);
    expect(result.stderr).not.toContain(TOKEN);
    return result;
  }

  it("prints one line for the accepted upload and exits 0", async () => {
    const result = await upload(["--pipeline", "reports", await bundle()]);

    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const key = server.uploads[0]?.headers["idempotency-key"];
    expect(key).toMatch(/^[\x21-\x7e]+$/);
    expect(result.stdout).toBe(
      `Upload: run_id=run-1 pipeline=reports status=queued manifest=${BUNDLE_ID} digest=${EXAMPLE_BUNDLE_DIGEST} replayed=false idempotency_key=${key} status_url=${server.url}/runs/run-1\n`,
    );
    expect(server.uploads[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(server.uploads[0]?.entries.map((entry) => entry.path)).toEqual([
      "manifest.json",
      "report.md",
    ]);
  });

  it("prints the JSON envelope", async () => {
    const result = await upload([
      "--pipeline",
      "reports",
      "--idempotency-key",
      "build-42",
      "--format",
      "json",
      await bundle(),
    ]);

    expect(result.code).toBe(0);
    expect(envelopeOf(result)).toEqual({
      command: "upload",
      ok: true,
      result: {
        run_id: "run-1",
        pipeline_id: "reports",
        status: "queued",
        manifest: { id: BUNDLE_ID, digest: EXAMPLE_BUNDLE_DIGEST, created: "2026-06-04T11:55:00Z" },
        status_url: `${server.url}/runs/run-1`,
        replayed: false,
        idempotency_key: "build-42",
        run: null,
      },
    });
    expect(server.uploads[0]?.headers["idempotency-key"]).toBe("build-42");
  });

  it("reports a replay of the same idempotency key", async () => {
    const path = await bundle();
    const args = ["--pipeline", "reports", "--idempotency-key", "build-42", "--format", "json"];
    await upload([...args, path]);

    const again = await upload([...args, path]);

    expect(again.code).toBe(0);
    expect(resultOf(again)).toMatchObject({ run_id: "run-1", replayed: true });
  });

  it("--wait follows the run and exits 0 when it succeeds", async () => {
    server.runStatuses = ["queued", "running", "succeeded"];

    const result = await upload([
      "--pipeline",
      "reports",
      "--wait",
      "--format",
      "json",
      await bundle(),
    ]);

    expect(result.code).toBe(0);
    const report = resultOf(result);
    expect(report.status).toBe("succeeded");
    expect(report.run).toMatchObject({ run_id: "run-1", status: "succeeded", error: null });
    expect(server.requests.filter((request) => request.method === "GET")).toHaveLength(3);
  });

  it("--wait exits 1 when the run fails, with the run's error", async () => {
    server.runStatuses = ["running", "failed"];
    const path = await bundle();

    const text = await upload(["--pipeline", "reports", "--wait", path]);
    server.runStatuses = ["failed"];
    const json = await upload(["--pipeline", "reports", "--wait", "--format", "json", path]);

    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^Upload: run_id=run-1 pipeline=reports status=failed /);
    expect(text.stderr).toBe("distributor: run run-1 failed: destination archive failed\n");
    expect(json.code).toBe(1);
    const envelope = envelopeOf(json);
    expect(envelope).toMatchObject({
      command: "upload",
      ok: false,
      error: { code: "publish_failed", message: "run run-2 failed: destination archive failed" },
    });
    expect(envelope.result).toMatchObject({ run_id: "run-2", status: "failed" });
  });

  it("without --wait a run that will fail still exits 0 once accepted", async () => {
    server.runStatuses = ["failed"];

    const result = await upload(["--pipeline", "reports", await bundle()]);

    expect(result.code).toBe(0);
    expect(server.requests.filter((request) => request.method === "GET")).toEqual([]);
  });

  it("without --wait a replay reads the run's current status once, and a failed run still exits 0", async () => {
    server.runStatuses = ["failed"];
    const path = await bundle();
    const args = ["--pipeline", "reports", "--idempotency-key", "build-42", path];
    const first = await upload(args);

    const replayed = await upload(args);

    expect(first.stdout).toMatch(/ status=queued .* replayed=false /);
    expect(replayed.code).toBe(0);
    expect(replayed.stderr).toBe("");
    expect(replayed.stdout).toMatch(
      /^Upload: run_id=run-1 pipeline=reports status=failed .* replayed=true /,
    );
    expect(server.requests.filter((request) => request.method === "GET")).toHaveLength(1);
  });

  it("a replay whose current status cannot be read still exits 0, saying so", async () => {
    const path = await bundle();
    const args = ["--pipeline", "reports", "--idempotency-key", "build-42", path];
    await upload(args);
    server.runFaults.push({ kind: "refuse", status: 500, code: "internal", message: "boom" });

    const replayed = await upload(args);

    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toMatch(
      /^Upload: run_id=run-1 pipeline=reports status=queued .* replayed=true /,
    );
    expect(replayed.stderr).toMatch(
      /^distributor: warning: run run-1 was accepted before \(replayed\), but its current status could not be read: .*boom.*; status shows the run as first accepted\n$/,
    );
  });

  it("fails naming the token variable when it is missing or empty, sending nothing", async () => {
    const path = await bundle();

    const missing = await upload(["--pipeline", "reports", path], {
      DISTRIBUTOR_UPLOAD_TOKEN: undefined,
    });
    const empty = await upload(["--pipeline", "reports", "--format", "json", path], {
      DISTRIBUTOR_UPLOAD_TOKEN: "",
    });
    const named = await upload(["--pipeline", "reports", "--token-env", "REPORTS_TOKEN", path], {
      DISTRIBUTOR_UPLOAD_TOKEN: TOKEN,
    });

    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe("");
    expect(missing.stderr).toBe(
      "distributor: upload: environment variable DISTRIBUTOR_UPLOAD_TOKEN is not set; set it to the upload token (or name another variable with --token-env)\n",
    );
    expect(empty.code).toBe(1);
    expect(envelopeOf(empty).error).toEqual({
      code: "token_missing",
      message: expect.stringContaining("DISTRIBUTOR_UPLOAD_TOKEN is empty"),
    });
    expect(named.code).toBe(1);
    expect(named.stderr).toContain("environment variable REPORTS_TOKEN is not set");
    expect(server.requests).toEqual([]);
  });

  it("reads the token from the variable --token-env names", async () => {
    const result = await upload(
      ["--pipeline", "reports", "--token-env", "REPORTS_TOKEN", await bundle()],
      {
        REPORTS_TOKEN: TOKEN,
      },
    );

    expect(result.code).toBe(0);
    expect(server.uploads[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it("a refused upload exits 1 with the server's code and message", async () => {
    const result = await upload(["--pipeline", "reports", "--format", "json", await bundle()], {
      DISTRIBUTOR_UPLOAD_TOKEN: "wrong-token",
    });

    expect(result.code).toBe(1);
    expect(envelopeOf(result)).toEqual({
      command: "upload",
      ok: false,
      result: null,
      error: {
        code: "unauthorized",
        message: `upload of ${BUNDLE_ID} to ${server.url}/pipelines/reports/uploads: server answered 401 unauthorized: missing or invalid upload token`,
      },
    });
  });

  it("an invalid bundle fails before anything is sent", async () => {
    const path = await bundle();
    await writeFile(join(path, "report.md"), "# Report\nRainy.\n");

    const result = await upload(["--pipeline", "reports", "--format", "json", path]);

    expect(result.code).toBe(1);
    expect(envelopeOf(result).error?.code).toBe("bundle_invalid");
    expect(envelopeOf(result).error?.message).toContain("report.md: sha256 mismatch");
    expect(server.requests).toEqual([]);
  });

  it("says on stderr when it retries, and succeeds", async () => {
    server.uploadFaults.push({ kind: "unavailable", retryAfter: "1" });

    const result = await upload(["--pipeline", "reports", await bundle()]);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Upload: run_id=run-1 /);
    expect(result.stderr).toMatch(
      /^distributor: upload of .* server answered 503 queue_full: the upload queue is full; try again later \(retry after 1s\); retrying in 1\.\ds \(attempt 2\)\n$/,
    );
  });
});

describe("upload usage errors", () => {
  const cases: ReadonlyArray<readonly [string, readonly string[], string]> = [
    ["missing --server", ["--pipeline", "reports", "bundle"], "upload requires --server"],
    [
      "missing --pipeline",
      ["--server", "http://127.0.0.1:1", "bundle"],
      "upload requires --pipeline",
    ],
    [
      "missing bundle path",
      ["--server", "http://127.0.0.1:1", "--pipeline", "reports"],
      "upload requires a bundle path",
    ],
    [
      "two bundle paths",
      ["--server", "http://127.0.0.1:1", "--pipeline", "reports", "a", "b"],
      "upload accepts one bundle path",
    ],
    [
      "server that is no URL",
      ["--server", "127.0.0.1:8080", "--pipeline", "reports", "bundle"],
      'upload --server must be an http or https URL, got "127.0.0.1:8080"',
    ],
    [
      "token-env that is no variable name",
      ["--server", "http://h", "--pipeline", "p", "--token-env", "MY-TOKEN", "bundle"],
      'upload --token-env must name an environment variable, got "MY-TOKEN"',
    ],
    [
      "wait with a value",
      ["--server", "http://h", "--pipeline", "p", "--wait=maybe", "bundle"],
      '--wait takes no value, got "--wait=maybe"',
    ],
    [
      "format xml",
      ["--server", "http://h", "--pipeline", "p", "--format", "xml", "bundle"],
      'format must be text or json, not "xml"',
    ],
  ];

  it.concurrent.each(cases)("%s", async (_name, args, message) => {
    const result = await runCli(["upload", ...args]);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(`distributor: ${message}\n`);
  });

  it("an idempotency key the protocol refuses is a usage error", async () => {
    const result = await runCli(
      [
        "upload",
        "--server",
        "http://127.0.0.1:1",
        "--pipeline",
        "p",
        "--idempotency-key",
        "a b",
        "x",
      ],
      { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
    );

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(
      'distributor: upload --idempotency-key: idempotency key must be visible ASCII characters (no spaces), got "a b"\n',
    );
  });
});
