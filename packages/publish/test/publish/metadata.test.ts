import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { brotliDecompressSync, gunzipSync, gzipSync } from "node:zlib";
import { digestOf, memoryStores, writeSourceBundle } from "@distributor/engine/testing";
import { parseDocument, type SingleOwnerState, serializeDocument } from "@distributor/state";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { type Config, parseConfig } from "../../src/config/index.js";
import { adoptOutputs } from "../../src/maintenance/adopt.js";
import { audit } from "../../src/maintenance/audit.js";
import { applyPlan } from "../../src/plan-file/apply.js";
import { loadPlan, savePlan } from "../../src/plan-file/codec.js";
import type { SavedPlan } from "../../src/plan-file/saved-plan.js";
import { planRun } from "../../src/run/plan-run.js";
import { run, runSucceeded } from "../../src/run/run.js";
import type { RunReport } from "../../src/run/types.js";

// Object metadata rules end to end on the memory backend, which stores metadata per object as
// S3 does (the same checks run against Ceph RGW in packages/storage-s3/test/metadata.test.ts).

const PAGE = `<!doctype html><title>Home</title>${"<p>Sunny and warm.</p>".repeat(200)}\n`;
const FILES = {
  "index.html": PAGE,
  "docs/guide.html": PAGE.replace("Home", "Guide"),
  "assets/app.3f9a.css": `body{color:#333}${" ".repeat(3000)}\n`,
  "report.pdf": "%PDF-1.4 not really\n",
  "notes.txt": "plain\n",
};

function rules(html: string, encoding = "gzip"): string {
  return `
        metadata:
          - {match: "**/*.html", cache_control: "${html}", content_encoding: ${encoding}}
          - {match: "assets/**", cache_control: "public, max-age=31536000, immutable"}
          - {match: "**/*.pdf", content_disposition: attachment}
`;
}

let dir: string;
let stores: (path: string) => StorageBackend;
let backends: BackendRegistry;
let bucket: StorageBackend;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-metadata-"));
  await writeSourceBundle(createLocalBackend({ root: join(dir, "source") }), "", FILES, {
    id: "site",
  });
  stores = memoryStores();
  bucket = stores("site");
  backends = {
    local: async (location) => createLocalBackend({ root: location.path }),
    // The s3 destination lives in a memory store that outlives the runs.
    s3: async (location) => stores(location.bucket),
  };
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function config(metadata: string, policy = ""): Config {
  return parseConfig(`
pipelines:
  - id: site
    source: {backend: local, path: ${join(dir, "source")}}
    destinations:
      - id: bucket
        backend: s3
        bucket: site
        path_mapping: {mode: fixed}${policy}
${metadata}`);
}

async function publish(text: string, options: { repair?: boolean } = {}): Promise<RunReport> {
  const report = await run({ config: config(text), backends, ...options });
  expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
  return report;
}

async function state(): Promise<SingleOwnerState> {
  const text = Buffer.from(await bucket.readFile(".distributor.json")).toString();
  return parseDocument(text) as SingleOwnerState;
}

describe("metadata rules on a backend that stores object metadata", () => {
  it("stores every matched output with its rule's headers, compressed where the rule says", async () => {
    const report = await publish(rules("max-age=60"));
    expect(report.actions[0]?.action).toBe("publish_new");

    const html = await bucket.stat("index.html");
    expect(html.cacheControl).toBe("max-age=60");
    expect(html.contentEncoding).toBe("gzip");
    expect(html.contentType).toBe("text/html; charset=utf-8");
    const stored = await bucket.readFile("index.html");
    expect(gunzipSync(stored).toString()).toBe(PAGE);
    expect(stored.length).toBeLessThan(PAGE.length / 4);

    const css = await bucket.stat("assets/app.3f9a.css");
    expect(css.cacheControl).toBe("public, max-age=31536000, immutable");
    expect(css.contentEncoding).toBeUndefined();
    expect((await bucket.stat("report.pdf")).contentDisposition).toBe("attachment");
    const plain = await bucket.stat("notes.txt");
    expect([plain.cacheControl, plain.contentDisposition, plain.contentEncoding]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);

    // The state describes the stored bytes, and the bytes before encoding beside them.
    const records = new Map((await state()).outputs.map((output) => [output.path, output]));
    const index = records.get("index.html");
    expect(index?.metadata).toEqual({ cacheControl: "max-age=60", contentEncoding: "gzip" });
    expect(index?.decoded).toEqual(digestOf(PAGE));
    expect({ sha256: index?.sha256, size: index?.size }).toEqual({
      sha256: `sha256:${createHash("sha256").update(stored).digest("hex")}`,
      size: stored.length,
    });
    expect(records.get("notes.txt")?.metadata).toBeUndefined();
    expect(records.get("report.pdf")?.metadata).toEqual({ contentDisposition: "attachment" });
    // The report lists what is stored.
    const reported = report.actions[0]?.outputs.find((output) => output.path === "index.html");
    expect(reported?.size).toBe(stored.length);
  });

  it("skips a re-run with unchanged rules, and stores again exactly the outputs a changed rule affects", async () => {
    await publish(rules("max-age=60"));
    const before = await versions();
    const same = await publish(rules("max-age=60"));
    expect(same.actions[0]?.action).toBe("skip_same");

    const changed = await publish(rules("max-age=300"));
    expect(changed.actions[0]?.action).toBe("update_metadata");
    expect(changed.actions[0]?.outputs.map((output) => output.path).sort()).toEqual([
      "docs/guide.html",
      "index.html",
    ]);
    const after = await versions();
    for (const path of ["assets/app.3f9a.css", "notes.txt", "report.pdf"]) {
      expect(after.get(path), path).toBe(before.get(path));
    }
    expect(after.get("index.html")).not.toBe(before.get("index.html"));
    expect((await bucket.stat("index.html")).cacheControl).toBe("max-age=300");
    const records = new Map((await state()).outputs.map((output) => [output.path, output]));
    expect(records.get("index.html")?.metadata?.cacheControl).toBe("max-age=300");

    // And once more unchanged: nothing to do.
    expect((await publish(rules("max-age=300"))).actions[0]?.action).toBe("skip_same");
  });

  it("saves a plan of a metadata update that names the headers, and applies it", async () => {
    await publish(rules("max-age=60"));
    const { plan } = await planRun({ config: config(rules("no-cache")), backends });
    const entry = plan?.destinations[0];
    expect(entry?.action).toBe("update_metadata");
    expect(entry?.writes.map((write) => [write.path, write.metadata])).toEqual([
      ["docs/guide.html", { cache_control: "no-cache", content_encoding: "gzip" }],
      ["index.html", { cache_control: "no-cache", content_encoding: "gzip" }],
    ]);
    expect((await bucket.stat("index.html")).cacheControl).toBe("max-age=60");
    const file = join(dir, "plan.json");
    await savePlan(file, plan as SavedPlan);
    const applied = await applyPlan({
      plan: await loadPlan(file),
      config: config(rules("no-cache")),
      planName: file,
      backends,
    });
    expect(applied.actions.map((action) => [action.action, action.status, action.error])).toEqual([
      ["update_metadata", "published", null],
    ]);
    expect((await bucket.stat("index.html")).cacheControl).toBe("no-cache");
    expect(JSON.parse(Buffer.from(await bucket.readFile(".distributor.json")).toString())).toEqual(
      entry?.next_state,
    );
  });

  it("updates only this owner's records in a shared root", async () => {
    const shared = "\n        state: {mode: shared_root}";
    const first = await run({ config: config(rules("max-age=60"), shared), backends });
    expect(runSucceeded(first)).toBe(true);
    const changed = await run({ config: config(rules("no-cache"), shared), backends });
    expect(runSucceeded(changed), JSON.stringify(changed.actions)).toBe(true);
    expect(changed.actions[0]?.action).toBe("update_metadata");
    const document = parseDocument(
      Buffer.from(await bucket.readFile(".distributor.json")).toString(),
    );
    expect(document.schemaVersion).toBe(3);
    const index = document.outputs.find((output) => output.path === "index.html");
    expect(index?.metadata).toEqual({ cacheControl: "no-cache", contentEncoding: "gzip" });
    expect((await bucket.stat("index.html")).cacheControl).toBe("no-cache");
    const again = await run({ config: config(rules("no-cache"), shared), backends });
    expect(again.actions[0]?.action).toBe("skip_same");
  });

  it("changes the encoding, and drops every header when the rules go", async () => {
    await publish(rules("max-age=60"));
    await publish(rules("max-age=60", "br"));
    expect((await bucket.stat("index.html")).contentEncoding).toBe("br");
    expect(brotliDecompressSync(await bucket.readFile("index.html")).toString()).toBe(PAGE);

    const report = await publish("");
    expect(report.actions[0]?.action).toBe("update_metadata");
    expect(report.actions[0]?.outputs).toHaveLength(4);
    expect(Buffer.from(await bucket.readFile("index.html")).toString()).toBe(PAGE);
    const html = await bucket.stat("index.html");
    expect([html.cacheControl, html.contentEncoding]).toEqual([undefined, undefined]);
    for (const output of (await state()).outputs) {
      expect(output.metadata, output.path).toBeUndefined();
      expect(output.decoded, output.path).toBeUndefined();
    }
    expect((await audit({ config: config(""), backends })).drift).toBe(false);
  });

  it("audits compressed outputs by their stored bytes and headers, and a repair restores the headers", async () => {
    await publish(rules("max-age=60"));
    const clean = await audit({ config: config(rules("max-age=60")), backends });
    expect(clean.drift).toBe(false);
    expect(clean.ok_count).toBe(5);

    // The same bytes stored without the headers the state records.
    const bytes = await bucket.readFile("index.html");
    await bucket.writeFile("index.html", bytes, { overwrite: true });
    const drifted = await audit({ config: config(rules("max-age=60")), backends });
    expect(drifted.changed_count).toBe(1);

    const repaired = await publish(rules("max-age=60"), { repair: true });
    expect(repaired.actions[0]?.action).toBe("repair");
    const html = await bucket.stat("index.html");
    expect([html.cacheControl, html.contentEncoding]).toEqual(["max-age=60", "gzip"]);
    expect((await audit({ config: config(rules("max-age=60")), backends })).drift).toBe(false);
  });

  it("repairs an encoded output whose encoder now gives other bytes, recording the new digest", async () => {
    await publish(rules("max-age=60"));
    // As if another zlib had encoded it: the record names other encoded bytes than ours would be.
    // A copy: a parsed state is frozen.
    const recorded = structuredClone(await state());
    const index = recorded.outputs.find((output) => output.path === "index.html");
    if (index === undefined) throw new Error("index.html is not recorded");
    const stored = await bucket.readFile("index.html");
    const other = gzipSync(Buffer.from(PAGE), { level: 1 });
    index.sha256 = `sha256:${createHash("sha256").update(other).digest("hex")}`;
    index.size = other.length;
    await bucket.writeFile(".distributor.json", serializeDocument(recorded), { overwrite: true });
    await bucket.writeFile("index.html", other, {
      overwrite: true,
      cacheControl: "max-age=60",
      contentEncoding: "gzip",
    });
    expect((await audit({ config: config(rules("max-age=60")), backends })).drift).toBe(false);
    await bucket.deletePaths("", ["index.html"]);

    const repaired = await publish(rules("max-age=60"), { repair: true });
    expect(repaired.actions[0]?.action).toBe("repair");
    expect(Buffer.from(await bucket.readFile("index.html"))).toEqual(Buffer.from(stored));
    const after = (await state()).outputs.find((output) => output.path === "index.html");
    expect(after?.sha256).toBe(`sha256:${createHash("sha256").update(stored).digest("hex")}`);
    expect(after?.decoded).toEqual(digestOf(PAGE));
    expect((await audit({ config: config(rules("max-age=60")), backends })).drift).toBe(false);
  });

  it("adopts an object only when its bytes and headers are what the rules store", async () => {
    await publish(rules("max-age=60"));
    const copies = new Map<string, { bytes: Uint8Array; metadata: Record<string, string> }>();
    for (const path of Object.keys(FILES)) {
      const entry = await bucket.stat(path);
      const metadata: Record<string, string> = {};
      if (entry.cacheControl) metadata.cacheControl = entry.cacheControl;
      if (entry.contentDisposition) metadata.contentDisposition = entry.contentDisposition;
      if (entry.contentEncoding) metadata.contentEncoding = entry.contentEncoding;
      copies.set(path, { bytes: await bucket.readFile(path), metadata });
    }
    // A fresh bucket holding the same objects, one of them without its Cache-Control.
    stores = memoryStores();
    bucket = stores("site");
    for (const [path, copy] of copies) {
      const metadata = path === "assets/app.3f9a.css" ? {} : copy.metadata;
      await bucket.writeFile(path, copy.bytes, metadata);
    }
    const report = await adoptOutputs({
      config: config(rules("max-age=60")),
      pipelineId: "site",
      destinationId: "bucket",
      mode: "adopt",
      backends,
    });
    const bundle = report.bundles[0];
    expect(bundle?.adopted_outputs.map((output) => output.path).sort()).toEqual([
      "docs/guide.html",
      "index.html",
      "notes.txt",
      "report.pdf",
    ]);
    expect(bundle?.unmatched_outputs).toEqual([
      { path: "assets/app.3f9a.css", reason: "different" },
    ]);
    const records = new Map((await state()).outputs.map((output) => [output.path, output]));
    expect(records.get("index.html")?.metadata).toEqual({
      cacheControl: "max-age=60",
      contentEncoding: "gzip",
    });
  });

  it("refuses a rule at run time on a backend that cannot store metadata", async () => {
    const local = createLocalBackend({ root: join(dir, "plain") });
    await expect(
      local.writeFile("a.html", "x", { cacheControl: "no-cache" }),
    ).rejects.toMatchObject({ kind: "unsupported" });
  });
});

async function versions(): Promise<Map<string, string | undefined>> {
  const found = new Map<string, string | undefined>();
  for (const path of Object.keys(FILES)) found.set(path, (await bucket.stat(path)).version);
  return found;
}
