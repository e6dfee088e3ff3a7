import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { parseConfig } from "@distributor/publish";
import { afterEach, beforeEach, expect, it } from "vitest";
import {
  bundleArchive,
  faultyBackends,
  type Running,
  startServer,
  TOKEN,
  upload,
  waitForRun,
  workspace,
} from "./helpers.js";

// What a success report promises (docs/operations.md), through `serve`: a replacement cancelled
// part-way, then the older bundle uploaded again, leaves exactly the older publication; the run
// that puts it back says `complete`, not `skip_same`.

let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running | undefined;

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
});
afterEach(async () => {
  await running?.server.close();
  running = undefined;
  await removeWorkspace();
});

const sha256 = (bytes: string | Buffer) =>
  `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

async function digestsBelow(directory: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const entry of await readdir(directory, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    // Writes let through before the gate may still rename their temp files: one gone is skipped.
    const bytes = await readFile(path).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    if (bytes !== undefined) found[relative(directory, path)] = sha256(bytes);
  }
  return found;
}

it("a cancelled replacement, then the older bundle uploaded again, leaves exactly the older publication", async () => {
  const site = join(root, "site");
  const config = parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    retention: 1h
    workers: 1
    staging_directory: ${join(root, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 8MiB}
    destinations:
      - id: site
        backend: local
        path: ${site}
        path_mapping: {mode: fixed}
`,
    { sourceName: "test.yml" },
  );
  const COUNT = 1_000;
  const a: Record<string, string> = {};
  const b: Record<string, string> = {};
  for (let i = 0; i < COUNT; i++) {
    const path = `d${Math.floor(i / 100)}/f${String(i).padStart(4, "0")}.txt`;
    a[path] = `A ${i}\n`;
    b[path] = `B ${i}\n`;
  }
  // B's writes pass until 30 % of them have landed, then wait until the cancel is asked for.
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let gated: () => void = () => undefined;
  const reachedGate = new Promise<void>((resolve) => {
    gated = resolve;
  });
  // Writes are counted only while `passing` is a number: that many more go through.
  let passing: number | undefined;
  const gateWhen = () => {
    if (passing === undefined) return false;
    if (passing > 0) {
      passing -= 1;
      return false;
    }
    gated();
    return true;
  };
  running = await startServer(config, { backends: faultyBackends(site, { gate, gateWhen }) });
  const { url } = running;
  const archiveA = await bundleArchive(root, "reports", a, "2026-06-04T09:00:00Z");
  const archiveB = await bundleArchive(root, "reports", b, "2026-06-04T10:00:00Z");

  const first = await waitForRun(
    url,
    (await upload(url, archiveA)).json.run_id as string,
    TOKEN,
    60_000,
  );
  expect(first).toMatchObject({ status: "succeeded" });
  const published = await digestsBelow(site);

  passing = COUNT * 0.3;
  const replacing = (await upload(url, archiveB)).json.run_id as string;
  await reachedGate;
  const overwritten = Object.entries(await digestsBelow(site)).filter(
    ([path, digest]) => b[path] !== undefined && digest === sha256(b[path] as string),
  );
  expect(overwritten.length).toBeGreaterThan(0);
  const cancel = await fetch(`${url}/runs/${replacing}/cancel`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  expect(cancel.status).toBe(202);
  release();
  expect(await waitForRun(url, replacing, TOKEN, 60_000)).toMatchObject({
    status: "failed",
    error: { code: "cancelled" },
  });

  passing = undefined;
  const back = await waitForRun(
    url,
    (await upload(url, archiveA)).json.run_id as string,
    TOKEN,
    60_000,
  );
  expect(back).toMatchObject({ status: "succeeded" });
  const [action] = (back.result as { actions: Array<{ action: string; status: string }> }).actions;
  // Whatever the cancelled run left behind, the run that puts A back writes it, so it cannot skip.
  expect(action).toMatchObject({ action: "complete", status: "published" });
  expect(await digestsBelow(site)).toEqual(await withState(published, site));
  const state = JSON.parse(await readFile(join(site, ".distributor.json"), "utf8"));
  expect(state.source.manifest.created).toBe("2026-06-04T09:00:00Z");
  expect(
    Object.fromEntries(
      state.outputs.map((o: { path: string; sha256: string }) => [o.path, o.sha256]),
    ),
  ).toEqual(Object.fromEntries(Object.entries(a).map(([path, text]) => [path, sha256(text)])));
}, 120_000);

/** `before` with the state file's digest as it is now (its timestamps move with every write). */
async function withState(before: Record<string, string>, site: string) {
  return {
    ...before,
    ".distributor.json": sha256(await readFile(join(site, ".distributor.json"))),
  };
}
