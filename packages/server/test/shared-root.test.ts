import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseConfig } from "@distributor/publish";
import { parseSharedRootState } from "@distributor/state";
import { afterEach, beforeEach, expect, it } from "vitest";
import {
  bundleArchive,
  emptied,
  type Running,
  startServer,
  tree,
  upload,
  waitForRun,
  workspace,
} from "./helpers.js";

// Two pipelines publish into one shared destination root. Their runs may start at the same time;
// the commit protocol's lease makes the later one wait, and the state keeps both owners.

let root: string;
let removeWorkspace: () => Promise<void>;
let running: Running | undefined;

beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
});
afterEach(async () => {
  await running?.server.close();
  await removeWorkspace();
});

it("keeps both owners' outputs after 50 concurrent uploads to two pipelines sharing a root", async () => {
  const site = join(root, "site");
  const pipeline = (id: string) => `  - id: ${id}
    source: {backend: http_upload}
    destinations:
      - id: web
        backend: local
        path: ${site}
        path_mapping: {mode: fixed}
        state: {mode: shared_root}
`;
  const config = parseConfig(
    `server:
  http: {listen: 127.0.0.1:0, queue_size: 64, workers: 2, staging_directory: ${join(root, "staging")}}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [alpha, beta]}
pipelines:
${pipeline("alpha")}${pipeline("beta")}`,
    { sourceName: "shared.yml" },
  );
  running = await startServer(config, { lockTimeoutMs: 60_000 });
  const { url } = running;

  const uploads: { pipeline: string; index: number; archive: Buffer }[] = [];
  for (let index = 0; index < 25; index++) {
    const created = new Date(Date.UTC(2026, 5, 4, 10, 0, index)).toISOString();
    for (const name of ["alpha", "beta"]) {
      const archive = await bundleArchive(
        root,
        `${name}.feed`,
        { [`${name}.md`]: `# ${name} ${index}\n` },
        created,
      );
      uploads.push({ pipeline: name, index, archive });
    }
  }
  const answers = await Promise.all(
    uploads.map((u) =>
      upload(url, u.archive, { pipeline: u.pipeline, key: `${u.pipeline}-${u.index}` }),
    ),
  );
  expect(answers.map((a) => a.status)).toEqual(uploads.map(() => 202));
  const finished = await Promise.all(
    answers.map((a) => waitForRun(url, a.json.run_id as string, undefined, 60_000)),
  );
  for (const run of finished) expect(run.error, JSON.stringify(run.error)).toBeNull();

  const state = parseSharedRootState(await readFile(join(site, ".distributor.json"), "utf8"));
  expect(state.owners.map((o) => o.scope.pipelineId).sort()).toEqual(["alpha", "beta"]);
  expect(state.outputs.map((o) => `${o.owner.pipelineId}:${o.path}`).sort()).toEqual([
    "alpha:alpha.md",
    "beta:beta.md",
  ]);
  // Older uploads that ran late were skipped: each owner ends at its newest bundle.
  expect(await readFile(join(site, "alpha.md"), "utf8")).toBe("# alpha 24\n");
  expect(await readFile(join(site, "beta.md"), "utf8")).toBe("# beta 24\n");
  expect(await tree(site)).toEqual([".distributor.json", "alpha.md", "beta.md"]);
  expect(await emptied(join(root, "staging"))).toEqual([]);
}, 120_000);
