import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

// A failed request must not keep its process alive: `upload --wait` against a server that
// restarted during the wait (its port refusing connections for a moment) printed its result,
// then stayed alive for the whole 90 s bound of the poll that failed.

const CLIENT = fileURLToPath(new URL("../dist/index.js", import.meta.url));

/** A port nothing listens on: taken, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, "close");
  return port;
}

it("exits promptly after requests that failed to connect", async () => {
  const port = await closedPort();
  const script = `
    const { createUploadClient } = await import(${JSON.stringify(CLIENT)});
    const client = createUploadClient({ server: "http://127.0.0.1:${port}", token: "t" });
    for (const call of [
      () => client.getRun("r1", { retries: 0, waitMs: 50_000 }),
      () => client.listRuns({ retries: 0 }),
      () => client.cancelRun("r1"),
    ]) {
      await call().catch((error) => process.stdout.write(error.code + "\\n"));
    }
    process.stdout.write("done\\n");
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  let printedAt = 0;
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    if (out.includes("done")) printedAt ||= Date.now();
  });
  const [code] = await once(child, "exit");
  expect(code).toBe(0);
  expect(out).toBe("connection_failed\nconnection_failed\nconnection_failed\ndone\n");
  expect(Date.now() - printedAt).toBeLessThan(2_000);
}, 20_000);
