import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import {
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
} from "@aws-sdk/client-s3";
import {
  audit,
  type Config,
  createManifestWorkflow,
  parseConfig,
  type RunReport,
  run,
  runSucceeded,
} from "@distributor/publish";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  backendOn,
  createBucket,
  emptyBucket,
  rawClient,
  s3Server,
} from "@distributor/storage-s3/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registryOn } from "./registry.js";

// Object metadata rules against Ceph RGW, checked with HEAD requests of a plain S3 client: the
// headers a rule sets are what the gateway returns, compressed outputs come back as stored (and
// decode to the source), and a changed rule stores again only the objects it matches.

const found = s3Server();
const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url));

const PAGE = `<!doctype html><title>Home</title>${"<p>Sunny and warm.</p>".repeat(300)}\n`;
const FILES: Record<string, string> = {
  "index.html": PAGE,
  "docs/guide.html": PAGE.replace("Home", "Guide"),
  "assets/app.3f9a.css": `body{color:#333}${" ".repeat(4000)}\n`,
  "assets/logo.svg": `<svg xmlns="http://www.w3.org/2000/svg"/>${" ".repeat(2000)}\n`,
  "report.pdf": "%PDF-1.4 not really\n",
  "data.bin": "binary-ish\n",
};

describe.skipIf(found === undefined)("metadata rules on Ceph RGW", () => {
  const server = found as S3Server;
  let bucket = "";
  let dir = "";
  const client = rawClient(server);

  const backends = registryOn(server);

  const configWith = (html: string, prefix: string): Config =>
    parseConfig(`pipelines:
  - id: site
    source: {backend: local, path: ${join(dir, "source")}}
    destinations:
      - id: bucket
        backend: s3
        bucket: ${bucket}
        prefix: ${prefix}
        endpoint: "${server.endpoint}"
        force_path_style: true
        path_mapping: {mode: fixed}
        metadata:
          - {match: "**/*.html", cache_control: "${html}", content_encoding: gzip}
          - {match: "assets/**/*.{css,svg}", cache_control: "public, max-age=31536000, immutable", content_encoding: br}
          - {match: "**/*.pdf", content_disposition: attachment}
          - {match: "*.bin", content_type: application/x-distributor-test}
`);

  const publish = async (config: Config): Promise<RunReport> => {
    const report = await run({ config, backends });
    expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
    return report;
  };

  const head = (key: string): Promise<HeadObjectCommandOutput> =>
    client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));

  const body = async (key: string): Promise<Buffer> => {
    const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return Buffer.from(
      await (
        response.Body as { transformToByteArray(): Promise<Uint8Array> }
      ).transformToByteArray(),
    );
  };

  beforeAll(async () => {
    bucket = await createBucket(server, "metadata");
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-metadata-"));
    for (const [path, text] of Object.entries(FILES)) {
      await mkdir(dirname(join(dir, "source", path)), { recursive: true });
      await writeFile(join(dir, "source", path), text);
    }
    await createManifestWorkflow({
      path: join(dir, "source"),
      id: "site",
      created: new Date("2026-06-04T11:55:00Z"),
    });
  });
  afterAll(async () => {
    client.destroy();
    if (bucket) await emptyBucket(server, bucket, "", true);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("stores each rule's headers, and HEAD returns them", async () => {
    await publish(configWith("max-age=60", "site"));

    const html = await head("site/index.html");
    expect(html.CacheControl).toBe("max-age=60");
    expect(html.ContentEncoding).toBe("gzip");
    expect(html.ContentType).toBe("text/html; charset=utf-8");
    const stored = await body("site/index.html");
    expect(html.ContentLength).toBe(stored.length);
    expect(gunzipSync(stored).toString()).toBe(PAGE);

    const css = await head("site/assets/app.3f9a.css");
    expect(css.CacheControl).toBe("public, max-age=31536000, immutable");
    expect(css.ContentEncoding).toBe("br");
    expect(css.ContentType).toBe("text/css; charset=utf-8");

    const pdf = await head("site/report.pdf");
    expect(pdf.ContentDisposition).toBe("attachment");
    expect(pdf.ContentEncoding).toBeUndefined();
    expect(pdf.CacheControl).toBeUndefined();

    expect((await head("site/data.bin")).ContentType).toBe("application/x-distributor-test");

    // The audit reads the stored (compressed) bytes back and finds what the state records.
    const audited = await audit({ config: configWith("max-age=60", "site"), backends });
    expect(audited.drift).toBe(false);
    expect(audited.ok_count).toBe(Object.keys(FILES).length);
  });

  it("skips unchanged rules and stores again only the objects a changed rule matches", async () => {
    await publish(configWith("max-age=60", "changed"));
    const before = new Map<string, string | undefined>();
    for (const path of Object.keys(FILES)) before.set(path, (await head(`changed/${path}`)).ETag);

    expect((await publish(configWith("max-age=60", "changed"))).actions[0]?.action).toBe(
      "skip_same",
    );
    const report = await publish(configWith("no-cache", "changed"));
    expect(report.actions[0]?.action).toBe("update_metadata");
    expect(report.actions[0]?.outputs.map((output) => output.path).sort()).toEqual([
      "docs/guide.html",
      "index.html",
    ]);

    for (const path of ["index.html", "docs/guide.html"]) {
      const object = await head(`changed/${path}`);
      expect(object.CacheControl, path).toBe("no-cache");
      expect(object.ContentEncoding, path).toBe("gzip");
    }
    // The others were not written again: same ETag and the headers they had.
    for (const path of ["assets/app.3f9a.css", "assets/logo.svg", "report.pdf", "data.bin"]) {
      expect((await head(`changed/${path}`)).ETag, path).toBe(before.get(path));
    }
    expect((await head("changed/assets/logo.svg")).CacheControl).toBe(
      "public, max-age=31536000, immutable",
    );
    expect(
      (await publish(configWith("no-cache", "changed"))).actions[0]?.action,
      "a re-run with the changed rules skips",
    ).toBe("skip_same");
    expect((await audit({ config: configWith("no-cache", "changed"), backends })).drift).toBe(
      false,
    );
  });

  it("publishes the static-site example with the headers its rules promise", async () => {
    const example = await readFile(join(repositoryRoot, "examples", "static-site.yml"), "utf8");
    const text = example
      .replace("bucket: www-example", `bucket: ${bucket}\n        prefix: example`)
      .replace("# endpoint: http://127.0.0.1:7480", `endpoint: "${server.endpoint}"`)
      .replace("# force_path_style: true", "force_path_style: true");
    const config = parseConfig(text, { cwd: repositoryRoot, env: {} });
    await publish(config);
    const page = await head("example/index.html");
    expect([page.CacheControl, page.ContentEncoding]).toEqual(["public, max-age=60", "gzip"]);
    const asset = await head("example/assets/app.3f9a1c2e.css");
    expect([asset.CacheControl, asset.ContentEncoding]).toEqual([
      "public, max-age=31536000, immutable",
      "gzip",
    ]);
    const pdf = await head("example/downloads/forecast-2026-11.pdf");
    expect([pdf.ContentDisposition, pdf.ContentEncoding]).toEqual(["attachment", undefined]);
    const robots = await head("example/robots.txt");
    expect(robots.ContentType).toBe("text/plain; charset=utf-8");
    expect(gunzipSync(await body("example/about/index.html")).toString()).toContain(
      "<h1>About</h1>",
    );
    expect((await publish(config)).actions[0]?.action).toBe("skip_same");
  });

  it("stores the headers of a multipart upload too", async () => {
    const MIB = 1024 * 1024;
    const backend = backendOn(server, bucket, "multipart", {
      multipartThreshold: 5 * MIB,
      partSize: 5 * MIB,
    });
    try {
      const bytes = randomBytes(6 * MIB);
      await backend.writeFile("large.bin", bytes, {
        size: bytes.length,
        cacheControl: "private, max-age=10",
        contentDisposition: 'attachment; filename="large.bin"',
        contentEncoding: "identity",
      });
      const object = await head("multipart/large.bin");
      expect(object.ContentLength).toBe(bytes.length);
      expect([object.CacheControl, object.ContentDisposition, object.ContentEncoding]).toEqual([
        "private, max-age=10",
        'attachment; filename="large.bin"',
        "identity",
      ]);
      const entry = await backend.stat("large.bin");
      expect(entry.cacheControl).toBe("private, max-age=10");
    } finally {
      await backend.close();
    }
  });
});
