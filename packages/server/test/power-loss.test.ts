import { mkdirSync, rmSync } from "node:fs";
import { mkdtemp, rm, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Config, parseConfig } from "@distributor/publish";
import {
  copyImage,
  imageDirectory,
  loopMountUnavailable,
  makeExt4Image,
  mountImage,
  unmountAll,
  unmountImage,
} from "@distributor/storage/testing";
import { afterAll, describe, expect, it } from "vitest";
import { bundleArchive, getJson, startServer, upload, waitForRun } from "./helpers.js";

// The embedded upload store and the staging directory on ext4 (default mode) on a loop device,
// cut by copying the image (docs/design/power-loss.md, "The real kernel"). Uploads are accepted
// two at a time; the image is copied right after each `202` reached the client, and at timed
// points between, while uploads are received, staged and recorded. Each copy is mounted (ext4
// replays its journal, as after a reboot) and a server is started on it: every `202` answered
// before the copy must be there — its run found, and run to success from its staged bundle —
// and every run the restarted server knows must succeed (no record of a staged bundle that is
// missing or half-written). The restarted server's store lock names this process, which a
// reboot would have ended: it is removed first, as a dead holder's is.

const CI = process.env.CI === "true";
const unavailable = loopMountUnavailable();
const UPLOADS = 8;

interface Cut {
  image: string;
  /** Run ids whose `202` the client had received when the image was copied. */
  answered: string[];
  when: string;
}

const images: string[] = [];
let dir: string | undefined;
afterAll(() => {
  unmountAll(images);
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** A server whose staging directory (and the store beside it) is below `mnt`. */
function configOn(mnt: string, destination: string): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    retention: 1h
    queue_size: 16
    workers: 2
    staging_directory: ${join(mnt, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 64KiB}
    destinations:
      - id: site
        backend: local
        path: ${destination}
`,
    { sourceName: "power-loss.yml" },
  );
}

async function record(mnt: string, work: string): Promise<Cut[]> {
  mkdirSync(join(mnt, "staging"), { mode: 0o700 });
  const running = await startServer(configOn(mnt, join(work, "site")));
  const cuts: Cut[] = [];
  const answered: string[] = [];
  const cut = (when: string) => {
    const image = join(dir as string, `cut-${cuts.length}.img`);
    copyImage(join(dir as string, "fs.img"), image);
    cuts.push({ image, answered: [...answered], when });
  };
  // Copies between the answers, while uploads are received and recorded.
  const timer = setInterval(() => cut("between answers"), 40);
  try {
    const archives = await Promise.all(
      Array.from({ length: UPLOADS }, (_, n) =>
        bundleArchive(
          work,
          "reports.example",
          { "report.md": `# Report ${n}\n${"x".repeat(n * 512)}` },
          new Date(Date.UTC(2026, 5, 4, 10, n)).toISOString(),
        ),
      ),
    );
    for (let n = 0; n < UPLOADS; n += 2) {
      await Promise.all(
        [n, n + 1].map(async (k) => {
          const answer = await upload(running.url, archives[k] as Buffer, { key: `upload-${k}` });
          expect(answer.status).toBe(202);
          answered.push(String(answer.json.run_id));
          // Synchronous: nothing of this process runs while the image is copied.
          cut(`right after the 202 of upload ${k}`);
        }),
      );
    }
  } finally {
    clearInterval(timer);
    await running.server.close();
  }
  return cuts;
}

async function replay(cut: Cut, index: number, work: string): Promise<void> {
  // Where the image was mounted when it was cut: the store records its staged bundles' paths.
  const mnt = join(dir as string, "mnt");
  mountImage(cut.image, mnt);
  const label = `copy ${index} (${cut.when}; answered: ${cut.answered.join(", ")})`;
  try {
    await unlink(join(mnt, "staging.store", "lock")).catch(() => undefined);
    // The same destination as when the upload was accepted (runs refuse a changed pipeline),
    // emptied: this replay's runs publish there afresh.
    await rm(join(work, "site"), { recursive: true, force: true });
    const running = await startServer(configOn(mnt, join(work, "site")));
    try {
      for (const runId of cut.answered) {
        const { status } = await getJson(running.url, `/runs/${runId}`);
        expect(status, `${label}: run ${runId} answered 202 before the cut`).toBe(200);
      }
      const { json } = await getJson(running.url, "/runs?limit=100");
      const runs = json.runs as { run_id: string }[];
      for (const { run_id } of runs) {
        const finished = await waitForRun(running.url, run_id);
        expect(finished.status, `${label}: run ${run_id}: ${JSON.stringify(finished)}`).toBe(
          "succeeded",
        );
      }
      expect(runs.length, label).toBeGreaterThanOrEqual(cut.answered.length);
    } finally {
      await running.server.close();
    }
  } finally {
    unmountImage(mnt);
    rmSync(cut.image, { force: true });
  }
}

describe.skipIf(unavailable !== undefined && !CI)(
  `the upload store and staging on ext4, cut after every 202 and between${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`,
  () => {
    it("keeps every accepted upload and reads nothing half-written as valid", async () => {
      if (unavailable !== undefined) {
        throw new Error(`CI=true, but ${unavailable}: the real-kernel replay cannot run`);
      }
      dir = imageDirectory("distributor-server-power-");
      const work = await mkdtemp(join(tmpdir(), "distributor-server-power-work-"));
      try {
        const image = join(dir, "fs.img");
        images.push(image);
        makeExt4Image(image, 32);
        const mnt = join(dir, "mnt");
        mountImage(image, mnt);
        let cuts: Cut[];
        try {
          cuts = await record(mnt, work);
        } finally {
          unmountImage(mnt);
        }
        expect(cuts.filter((c) => c.when.startsWith("right after")).length).toBe(UPLOADS);
        for (const [index, cut] of cuts.entries()) await replay(cut, index, work);
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    }, 120_000);
  },
);
