import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { join } from "node:path";
import { buildManifest, fileDigest, serializeManifest } from "@distributor/bundle";
import { type RawEntry, rawTar } from "@distributor/bundle/testing";
import type { BackendRegistry, Config } from "@distributor/publish";
import { parseConfig } from "@distributor/publish";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import { checkWire, tree } from "../src/testing/index.js";

// What the server's suites share beyond `@distributor/server/testing` (a running server, bundles
// and the requests of a producer, re-exported here).
export {
  bundleArchive,
  checkWire,
  getJson,
  OTHER_TOKEN,
  packDirectory,
  type Running,
  startServer,
  TOKEN,
  TOKEN_ENV,
  tree,
  type UploadOptions,
  upload,
  waitForRun,
  wireSchemaOf,
  workspace,
  writeBundle,
} from "../src/testing/index.js";

/** A configuration with upload pipelines `reports` (and `other`), destinations below `root`. */
export function uploadConfig(root: string, extra = ""): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    retention: 1h
    queue_size: 8
    workers: 2
    staging_directory: ${join(root, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
  - id: other
    token_env: OTHER_TOKEN
    allow_pipelines: [other]
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 64KiB}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "site")}
  - id: other
    source: {backend: http_upload}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "other-site")}
${extra}`,
    { sourceName: "test.yml" },
  );
}

// Hand-built archives come from the bundle package's test helper, which its extractor tests share.
export { type RawEntry, rawTar };

/** The entries of a valid one-file bundle, for raw archives that add a bad entry to it. */
export function validEntries(id = "reports.raw"): RawEntry[] {
  const content = "# Report\nSunny.\n";
  const manifest = buildManifest({
    id,
    created: new Date("2026-06-04T11:55:00Z"),
    files: [{ path: "report.md", ...fileDigest(content) }],
  });
  return [
    { path: "manifest.json", body: serializeManifest(manifest) },
    { path: "report.md", body: content },
  ];
}

/**
 * Waits until `directory` holds nothing: a finished run's record is written before its staged
 * bundle is removed (so a crash never leaves a live run without its bundle).
 */
export async function emptied(directory: string, timeoutMs = 5_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const entries = await tree(directory);
    if (entries.length === 0 || Date.now() > deadline) return entries;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A tree of the workspace without the embedded store beside the staging directory. */
export function withoutStore(entries: string[]): string[] {
  return entries.filter((entry) => !entry.startsWith("staging.store"));
}

/**
 * Streams a body with node:http that is never ended by the client, resolving with the response
 * and how many bytes had been sent when it arrived.
 */
export function streamUntilAnswered(
  url: string,
  path: string,
  headers: Record<string, string>,
  chunk: Buffer,
  limitBytes: number,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const request = httpRequest(`${url}${path}`, { method: "POST", headers }, (response) => {
      answered = true;
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (text: string) => {
        body += text;
      });
      response.on("end", () => {
        request.destroy();
        try {
          checkWire("POST", path, response.statusCode ?? 0, JSON.parse(body));
        } catch (error) {
          reject(error);
          return;
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body, sent });
      });
    });
    request.on("error", (error) => {
      if (!answered) reject(error);
    });
    const pump = () => {
      while (!answered && sent < limitBytes) {
        sent += chunk.length;
        if (!request.write(chunk)) {
          request.once("drain", pump);
          return;
        }
      }
      if (!answered && sent >= limitBytes) reject(new Error(`no answer after ${sent} bytes`));
    };
    pump();
  });
}

/**
 * A registry whose local backend for `path` is wrapped: `writeFile` fails, or waits for `gate`
 * (each call for which `gateWhen`, when given, says so).
 */
export function faultyBackends(
  path: string,
  fault: { fail?: Error; gate?: Promise<void>; gateWhen?: () => boolean },
): BackendRegistry {
  return {
    local: async (location) => {
      const backend = createLocalBackend({ root: location.path });
      if (location.path !== path) return backend;
      return new Proxy(backend, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== "function") return value;
          // The backend keeps private fields: its methods must run on the backend itself.
          if (property !== "writeFile") return value.bind(target);
          return async (...args: unknown[]) => {
            if (fault.gate && (fault.gateWhen?.() ?? true)) await fault.gate;
            if (fault.fail) throw fault.fail;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      }) as StorageBackend;
    },
  };
}
