import { readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import { c as createTar } from "tar";
import { describe, expect, it } from "vitest";
import { runCli, startServe, useTempDir, writeBundle } from "./helpers.js";

// `distributor serve` as a real process: uploads made with fetch and archives packed by tar.

const TOKEN = "serve-test-token-value";
const tempDir = useTempDir();

function configText(dir: string): string {
  return `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(dir, "staging")}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(dir, "site")}}
`;
}

async function packBundle(dir: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of createTar({ gzip: true, cwd: dir, portable: true }, [
    "manifest.json",
    "report.md",
  ])) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

async function postUpload(url: string, archive: Buffer) {
  const response = await fetch(`${url}/pipelines/reports/uploads`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/gzip" },
    body: new Uint8Array(archive),
  });
  return { status: response.status, json: (await response.json()) as Record<string, string> };
}

async function runStatus(url: string, runId: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/runs/${runId}`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  return (await response.json()) as Record<string, unknown>;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("distributor serve", () => {
  it("publishes an uploaded bundle, and on SIGTERM lets the running run finish and exits 0", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const bundle = join(dir, "bundle");
    await writeBundle(bundle, "reports.serve", "2026-06-04T11:55:00Z", {
      "report.md": "# Report\nSunny.\n",
    });
    const serving = await startServe(join(dir, "distributor.yml"), {
      cwd: dir,
      env: { REPORTER_TOKEN: TOKEN },
    });
    try {
      const first = await postUpload(serving.url, await packBundle(bundle));
      expect(first.status).toBe(202);
      await until(
        async () => (await runStatus(serving.url, first.json.run_id ?? "")).status === "succeeded",
        "the first run",
      );
      expect(await readFile(join(dir, "site", "report.md"), "utf8")).toBe("# Report\nSunny.\n");

      // Another run's live lease holds the destination, so the next run waits inside it.
      const lease = join(dir, "site", ".distributor.lease.json");
      const now = Date.now();
      await writeFile(
        lease,
        JSON.stringify({
          format: "distributor-lease/1",
          owner: { pipeline_id: "elsewhere", destination_id: "site" },
          run_id: "held-by-test",
          host: hostname(),
          pid: process.pid,
          acquired_at: new Date(now).toISOString(),
          expires_at: new Date(now + 600_000).toISOString(),
          journal: [],
          directories: [],
        }),
      );
      await writeBundle(bundle, "reports.serve", "2026-06-04T12:55:00Z", {
        "report.md": "# Report\nRainy.\n",
      });
      const second = await postUpload(serving.url, await packBundle(bundle));
      expect(second.status).toBe(202);
      const runId = second.json.run_id ?? "";
      await until(
        async () => (await runStatus(serving.url, runId)).status === "running",
        "the second run to start",
      );

      serving.child.kill("SIGTERM");
      await until(async () => serving.stderr().includes('"phase":"started"'), "shutdown to begin");
      let exited = false;
      void serving.exited.then(() => {
        exited = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(exited).toBe(false);
      await expect(fetch(`${serving.url}/healthz`)).rejects.toThrow();

      await rm(lease);
      expect(await serving.exited).toBe(0);
      expect(await readFile(join(dir, "site", "report.md"), "utf8")).toBe("# Report\nRainy.\n");
      const lines = serving
        .stderr()
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.filter((l) => l.type === "run").map((l) => [l.run_id, l.status])).toEqual([
        [first.json.run_id, "succeeded"],
        [runId, "succeeded"],
      ]);
      expect(lines.filter((l) => l.type === "request").length).toBeGreaterThanOrEqual(4);
      expect(serving.stderr()).not.toContain(TOKEN);
      expect(await runCli(["inspect", "--format", "json", join(dir, "site")])).toMatchObject({
        code: 0,
      });
    } finally {
      if (serving.child.exitCode === null) serving.child.kill("SIGKILL");
    }
  }, 60_000);

  it("fails to start without the token, naming its reference and never a value", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const result = await runCli(["serve", "--config", "distributor.yml"], {
      cwd: dir,
      env: { REPORTER_TOKEN: "" },
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^distributor: upload_tokens\[0\] \(id reporter\): secret REPORTER_TOKEN is not available/,
    );
  });

  it("fails to start on a listen address in use, and refuses a malformed one", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const { port } = blocker.address() as { port: number };
    try {
      const env = { REPORTER_TOKEN: TOKEN };
      const busy = await runCli(["serve", "--listen", `127.0.0.1:${port}`], { cwd: dir, env });
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain(`cannot listen on 127.0.0.1:${port}: address already in use`);
      const bad = await runCli(["serve", "--listen", "localhost"], { cwd: dir, env });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("--listen");
    } finally {
      blocker.close();
    }
  });

  it.each(["127.0.0.1:99999", "[::1]:65536", ":123456"])(
    "refuses --listen %s as a port out of range",
    async (address) => {
      const dir = tempDir();
      await writeFile(join(dir, "distributor.yml"), configText(dir));
      const port = address.slice(address.lastIndexOf(":") + 1);

      const result = await runCli(["serve", "--listen", address], {
        cwd: dir,
        env: { REPORTER_TOKEN: TOKEN },
      });

      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).toBe(
        `distributor: --listen: port ${port} of ${JSON.stringify(address)} is out of range: use 1–65535, or 0 for any free port\n`,
      );
    },
  );
});

describe("serve's log lines", () => {
  it("carry a level, and server.log.level leaves out the lines below it", async () => {
    const dir = tempDir();
    const bundle = join(dir, "bundle");
    await writeBundle(bundle, "reports.logs", "2026-06-04T11:55:00Z", { "report.md": "x\n" });
    for (const level of ["info", "warn"] as const) {
      await writeFile(
        join(dir, "distributor.yml"),
        configText(dir).replace("server:\n", `server:\n  log: {level: ${level}}\n`),
      );
      const serving = await startServe(join(dir, "distributor.yml"), {
        cwd: dir,
        env: { REPORTER_TOKEN: TOKEN },
      });
      try {
        const accepted = await postUpload(serving.url, await packBundle(bundle));
        await until(
          async () =>
            (await runStatus(serving.url, accepted.json.run_id ?? "")).status !== "queued",
          "the run",
        );
        await fetch(`${serving.url}/healthz`);
      } finally {
        serving.child.kill("SIGTERM");
        await serving.exited;
      }
      const lines = serving
        .stderr()
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { type: string; level: string; state?: string });
      for (const line of lines) expect(["debug", "info", "warn", "error"]).toContain(line.level);
      // Start and shutdown are always there; requests and run states only at info.
      expect(lines.some((line) => line.type === "listening")).toBe(true);
      expect(lines.some((line) => line.type === "shutdown")).toBe(true);
      const requests = lines.filter((line) => line.type === "request");
      const states = lines.filter((line) => line.type === "run_state").map((line) => line.state);
      if (level === "info") {
        expect(requests.length).toBeGreaterThanOrEqual(2);
        expect(states.slice(0, 2)).toEqual(["queued", "started"]);
      } else {
        expect(requests).toEqual([]);
        expect(states).toEqual([]);
      }
      expect(serving.stderr()).not.toContain(TOKEN);
    }
  }, 60_000);
});
