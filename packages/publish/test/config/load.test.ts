import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseConfig } from "../../src/config/index.js";
import { problemsOf } from "./helpers.js";

const MINIMAL = `
pipelines:
  - id: reports
    source:
      backend: local
      path: /var/spool/reports
    destinations:
      - id: archive
        backend: local
        path: /srv/reports/archive
`;

function configError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("parseConfig defaults", () => {
  it("fills in every default of a minimal configuration", () => {
    const config = parseConfig(MINIMAL, {
      sourceName: "minimal.yml",
      cwd: "/work",
      env: { HOME: "/home/ops" },
    });
    // The service's own directory under ~/.local/state: a slug of the file and a digest.
    const service = "config:/work/minimal.yml";
    const own = `/home/ops/.local/state/distributor/serve/work-minimal.yml-${createHash("sha256").update(service).digest("hex").slice(0, 12)}`;
    expect(config).toEqual({
      sourceName: "minimal.yml",
      server: {
        service,
        configFile: "/work/minimal.yml",
        metrics: { public: false },
        log: { level: "info" },
        http: {
          listen: "127.0.0.1:8080",
          retentionMs: 24 * 3600 * 1000,
          queueSize: 16,
          workers: 2,
          stagingDirectory: `${own}/staging`,
        },
        store: {
          backend: "embedded",
          path: `${own}/store`,
          maxRuns: 10_000,
          claimTimeoutMs: 60_000,
        },
        uploads: { partialTtlMs: 86_400_000, maxPartialsPerToken: 4 },
      },
      secrets: {},
      uploadTokens: [],
      pipelines: [
        {
          id: "reports",
          source: { backend: "local", path: "/var/spool/reports" },
          validation: {
            unlistedFiles: "reject",
            maxFiles: 10_000,
            maxTotalSize: 10_000_000_000,
            portableNames: false,
          },
          destinations: [
            {
              id: "archive",
              location: { backend: "local", path: "/srv/reports/archive", fsync: true },
              publish: { source: true, html: false },
              transform: { markdownToHtml: { enabled: false, mode: "sidecar" } },
              pathMapping: { mode: "preserve_relative" },
              state: { mode: "single_owner" },
              reconciliation: { mode: "replace" },
              retention: { prune: { enabled: false } },
              transfer: {
                onDestinationSame: "skip",
                onDestinationOlder: "replace",
                onDestinationNewer: "skip",
                onConflict: "fail",
              },
              metadata: [],
              maxStateSize: 64 * 1024 ** 2,
              maxEntries: 10_000_000,
              layout: { mode: "in_place" },
            },
          ],
        },
      ],
    });
    expect(config.pipelines[0]?.destinations[0]).not.toHaveProperty("links");
  });

  it("gives two configuration files that name one server.name a default staging area and store each", () => {
    const named = `server:\n  name: publisher\n${MINIMAL}`;
    const options = { cwd: "/work", env: { HOME: "/home/ops" } };
    const one = parseConfig(named, { ...options, sourceName: "one/distributor.yml" });
    const two = parseConfig(named, { ...options, sourceName: "two/distributor.yml" });
    expect([one.server.service, two.server.service]).toEqual(["publisher", "publisher"]);
    expect(one.server.configFile).toBe("/work/one/distributor.yml");
    expect(two.server.configFile).toBe("/work/two/distributor.yml");
    const digest = (file: string) =>
      createHash("sha256").update(`config:${file}`).digest("hex").slice(0, 12);
    const own = (file: string) =>
      `/home/ops/.local/state/distributor/serve/publisher-${digest(file)}`;
    expect(one.server.store.path).toBe(`${own("/work/one/distributor.yml")}/store`);
    expect(two.server.store.path).toBe(`${own("/work/two/distributor.yml")}/store`);
    expect(one.server.http.stagingDirectory).toBe(`${own("/work/one/distributor.yml")}/staging`);
    expect(two.server.http.stagingDirectory).toBe(`${own("/work/two/distributor.yml")}/staging`);
    expect(one.server.store.path).not.toBe(two.server.store.path);
    // Where earlier versions kept the store of every file naming the service, for a warning.
    const earlier = `/home/ops/.local/state/distributor/serve/publisher-${createHash("sha256").update("publisher").digest("hex").slice(0, 12)}`;
    expect([one.server.earlierDirectory, two.server.earlierDirectory]).toEqual([earlier, earlier]);
    const placed = parseConfig(
      `server:\n  name: publisher\n  store:\n    path: /srv/store\n${MINIMAL}`,
      {
        ...options,
        sourceName: "one/distributor.yml",
      },
    );
    expect(placed.server.earlierDirectory).toBeUndefined();
  });

  it("fills in backend defaults for ssh, s3 and http_upload", () => {
    const config = parseConfig(
      `
upload_tokens: [{id: reporter, token_env: UPLOAD_TOKEN, allow_pipelines: [ingest]}]
pipelines:
  - id: ingest
    source: {backend: http_upload}
    destinations:
      - {id: remote, backend: ssh, host: files.example.com, user: publisher, path: /srv/reports}
      - {id: bucket, backend: s3, bucket: reports}
`,
      { env: { HOME: "/home/operator" } },
    );
    const pipeline = config.pipelines[0];
    expect(pipeline?.source).toEqual({ backend: "http_upload", maxUploadSize: 64 * 1024 * 1024 });
    expect(pipeline?.destinations.map((destination) => destination.location)).toEqual([
      {
        backend: "ssh",
        host: "files.example.com",
        port: 22,
        user: "publisher",
        path: "/srv/reports",
        knownHostsFile: "/home/operator/.ssh/known_hosts",
        hostKeyPolicy: "strict",
        fsync: true,
      },
      { backend: "s3", bucket: "reports", prefix: "", region: "us-east-1", forcePathStyle: false },
    ]);
    expect(config.uploadTokens).toEqual([
      { id: "reporter", tokenEnv: "UPLOAD_TOKEN", allowPipelines: ["ingest"] },
    ]);
  });

  it("defaults links.primary and the transform mode inside blocks that leave them out", () => {
    const config = parseConfig(`
pipelines:
  - id: reports
    source: {backend: local, path: /source}
    destinations:
      - id: web
        backend: local
        path: /web
        publish: {html: true}
        transform: {markdown_to_html: {enabled: true}}
        links: {base_url: "https://reports.example.com/web"}
        retention: {prune: {enabled: true, keep_latest: 0}}
`);
    const destination = config.pipelines[0]?.destinations[0];
    expect(destination?.publish).toEqual({ source: true, html: true });
    expect(destination?.transform).toEqual({ markdownToHtml: { enabled: true, mode: "sidecar" } });
    // The base URL is a directory: a missing trailing slash is added.
    expect(destination?.links).toEqual({
      baseUrl: "https://reports.example.com/web/",
      primary: "auto",
    });
    expect(destination?.retention).toEqual({ prune: { enabled: true, keepLatest: 0 } });
  });

  it("treats a key with an empty value as left out", () => {
    const config = parseConfig(`
server:
secrets: ~
pipelines:
  - id: reports
    source: {backend: local, path: /source}
    destinations:
      - id: archive
        backend: local
        path: /archive
        links:
        transfer: {on_destination_same: null}
`);
    expect(config.secrets).toEqual({});
    expect(config.server.http.listen).toBe("127.0.0.1:8080");
    expect(config.pipelines[0]?.destinations[0]?.links).toBeUndefined();
    expect(config.pipelines[0]?.destinations[0]?.transfer.onDestinationSame).toBe("skip");
  });
});

describe("source.signatures", () => {
  it("resolves allowed_signers against the working directory and defaults required and namespace", () => {
    const config = parseConfig(
      `
pipelines:
  - id: reports
    source:
      backend: s3
      bucket: drop
      signatures: {allowed_signers: keys/allowed_signers}
    destinations: [{id: archive, backend: local, path: /out}]
  - id: ingest
    source:
      backend: http_upload
      signatures: {required: false, allowed_signers: ~/signers, namespace: releases@example.com}
    destinations: [{id: archive, backend: local, path: /in}]
upload_tokens: [{id: t, token_env: T, allow_pipelines: [ingest]}]
`,
      { cwd: "/etc/distributor", env: { HOME: "/home/operator" } },
    );
    expect(config.pipelines.map((pipeline) => pipeline.source.signatures)).toEqual([
      {
        required: true,
        allowedSigners: "/etc/distributor/keys/allowed_signers",
        namespace: "distributor",
      },
      {
        required: false,
        allowedSigners: "/home/operator/signers",
        namespace: "releases@example.com",
      },
    ]);
  });

  it("leaves signatures out of a source that does not configure them", () => {
    expect(parseConfig(MINIMAL).pipelines[0]?.source).toEqual({
      backend: "local",
      path: "/var/spool/reports",
    });
  });

  it("requires allowed_signers and refuses unknown keys and empty values", () => {
    const problems = (signatures: string) =>
      problemsOf(
        MINIMAL.replace("path: /var/spool/reports", `path: /s\n      signatures: ${signatures}`),
      );
    expect(problems("{required: true}")).toEqual([
      "pipelines[0].source.signatures.allowed_signers is required",
    ]);
    expect(problems("{allowed_signers: /k, keys: /k}")).toEqual([
      "pipelines[0].source.signatures.keys: unknown key",
    ]);
    expect(problems('{allowed_signers: /k, namespace: ""}')).toEqual([
      "pipelines[0].source.signatures.namespace must not be empty",
    ]);
    expect(problems("{allowed_signers: /k, required: yes}")).toEqual([
      "pipelines[0].source.signatures.required must be true or false",
    ]);
  });

  it("refuses signatures on a destination", () => {
    const text = MINIMAL.replace(
      "path: /srv/reports/archive",
      "path: /o\n        signatures: {allowed_signers: /k}",
    );
    expect(problemsOf(text)).toEqual(["pipelines[0].destinations[0].signatures: unknown key"]);
  });
});

describe("remote timeouts", () => {
  it("converts an ssh or s3 location's timeouts to milliseconds, and leaves them out otherwise", () => {
    const config = parseConfig(`
pipelines:
  - id: p
    source: {backend: s3, bucket: in, timeouts: {connect: 2s, request: 1m30s}}
    destinations:
      - {id: d, backend: ssh, host: h, user: u, path: /srv, timeouts: {request: 45s}}
      - {id: e, backend: s3, bucket: out}
`);
    const pipeline = config.pipelines[0];
    expect(pipeline?.source).toMatchObject({
      timeouts: { connectMs: 2000, requestMs: 90_000 },
    });
    expect(pipeline?.destinations[0]?.location).toMatchObject({ timeouts: { requestMs: 45_000 } });
    expect(pipeline?.destinations[1]?.location).not.toHaveProperty("timeouts");
  });
});

describe("parseConfig explicit values", () => {
  it("keeps every configured value, converting durations to ms and sizes to bytes", () => {
    const config = parseConfig(
      `
server:
  http: {listen: "[::1]:9000", retention: 1h30m, queue_size: 4, workers: 1, staging_directory: staging}
secrets: {directory: secrets}
upload_tokens:
  - {id: reporter, token_env: UPLOAD_TOKEN, allow_pipelines: [ingest]}
pipelines:
  - id: ingest
    source: {backend: http_upload, max_upload_size: 1.5MiB}
    validation: {unlisted_files: ignore, max_files: 20, max_total_size: 2GiB, portable_names: true}
    destinations:
      - id: site
        backend: s3
        bucket: reports
        prefix: site/daily
        region: eu-west-1
        endpoint: "http://127.0.0.1:4568"
        force_path_style: true
        credentials: {access_key_id_env: S3_KEY, secret_access_key_env: S3_SECRET}
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true, mode: index}}
        path_mapping: {mode: fixed}
        links: {base_url: "https://reports.example.com/site/", primary: html}
        state: {mode: shared_root}
        reconciliation: {mode: merge}
        retention: {prune: {enabled: true, older_than: 168h, keep_latest: 3}}
        transfer: {on_destination_same: fail, on_destination_older: skip, on_destination_newer: fail, on_conflict: fail}
        max_state_size: 256 MiB
        max_entries: 20000000
        metadata:
          - {match: "**/*.html", cache_control: "max-age=60", content_encoding: gzip}
          - {match: "assets/**"}
          - {match: "**/*.pdf", content_type: application/pdf, content_disposition: attachment}
      - id: mirror
        backend: ssh
        host: 10.0.0.5
        port: 2222
        user: publisher
        path: reports
        private_key_file: keys/id_ed25519
        passphrase_env: KEY_PASSPHRASE
        known_hosts_file: ~/known
        host_key_policy: accept_new
        fsync: false
`,
      { cwd: "/work/site", env: { HOME: "/home/operator" } },
    );
    expect(config.server.http).toEqual({
      listen: "[::1]:9000",
      retentionMs: 5_400_000,
      queueSize: 4,
      workers: 1,
      stagingDirectory: "/work/site/staging",
    });
    expect(config.secrets).toEqual({ directory: "/work/site/secrets" });
    const pipeline = config.pipelines[0];
    expect(pipeline?.source).toEqual({ backend: "http_upload", maxUploadSize: 1_572_864 });
    expect(pipeline?.validation).toEqual({
      unlistedFiles: "ignore",
      maxFiles: 20,
      maxTotalSize: 2 * 1024 ** 3,
      portableNames: true,
    });
    expect(pipeline?.destinations[0]).toEqual({
      id: "site",
      location: {
        backend: "s3",
        bucket: "reports",
        prefix: "site/daily",
        region: "eu-west-1",
        endpoint: "http://127.0.0.1:4568",
        forcePathStyle: true,
        credentials: { accessKeyIdEnv: "S3_KEY", secretAccessKeyEnv: "S3_SECRET" },
      },
      publish: { source: false, html: true },
      transform: { markdownToHtml: { enabled: true, mode: "index" } },
      pathMapping: { mode: "fixed" },
      links: { baseUrl: "https://reports.example.com/site/", primary: "html" },
      state: { mode: "shared_root" },
      reconciliation: { mode: "merge" },
      retention: { prune: { enabled: true, olderThanMs: 604_800_000, keepLatest: 3 } },
      transfer: {
        onDestinationSame: "fail",
        onDestinationOlder: "skip",
        onDestinationNewer: "fail",
        onConflict: "fail",
      },
      metadata: [
        { match: "**/*.html", cacheControl: "max-age=60", contentEncoding: "gzip" },
        { match: "assets/**" },
        {
          match: "**/*.pdf",
          contentType: "application/pdf",
          contentDisposition: "attachment",
        },
      ],
      maxStateSize: 256 * 1024 ** 2,
      maxEntries: 20_000_000,
      layout: { mode: "in_place" },
    });
    expect(pipeline?.destinations[1]?.location).toEqual({
      backend: "ssh",
      host: "10.0.0.5",
      port: 2222,
      user: "publisher",
      // The remote root is not a path on this machine: it is kept as written.
      path: "reports",
      privateKeyFile: "/work/site/keys/id_ed25519",
      passphraseEnv: "KEY_PASSPHRASE",
      knownHostsFile: "/home/operator/known",
      hostKeyPolicy: "accept_new",
      fsync: false,
    });
  });

  it("accepts both reconciliation modes and both state modes side by side", () => {
    const config = parseConfig(`
pipelines:
  - id: reports
    source: {backend: local, path: /source}
    destinations:
      - {id: a, backend: local, path: /a, reconciliation: {mode: replace}, state: {mode: single_owner}}
      - {id: b, backend: local, path: /b, reconciliation: {mode: merge}, state: {mode: shared_root}}
`);
    const destinations = config.pipelines[0]?.destinations ?? [];
    expect(destinations.map((d) => [d.reconciliation.mode, d.state.mode])).toEqual([
      ["replace", "single_owner"],
      ["merge", "shared_root"],
    ]);
  });

  it("accepts two pipelines sharing one shared_root destination root", () => {
    const config = parseConfig(`
pipelines:
  - id: reports-source
    source: {backend: local, path: /spool}
    destinations:
      - {id: shared, backend: local, path: /srv/shared, state: {mode: shared_root}}
  - id: reports-html
    source: {backend: local, path: /spool}
    destinations:
      - id: shared
        backend: local
        path: /srv/shared
        state: {mode: shared_root}
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true, mode: sidecar}}
`);
    expect(config.pipelines.map((pipeline) => pipeline.id)).toEqual([
      "reports-source",
      "reports-html",
    ]);
  });

  it("allows anchors and aliases to share blocks", () => {
    const config = parseConfig(`
pipelines:
  - id: reports
    source: {backend: local, path: /source}
    destinations:
      - {id: a, backend: local, path: /a, transfer: &strict {on_destination_newer: fail}}
      - {id: b, backend: local, path: /b, transfer: *strict}
`);
    expect(config.pipelines[0]?.destinations[1]?.transfer.onDestinationNewer).toBe("fail");
  });
});

describe("parseConfig errors", () => {
  it("rejects an unknown key with its path", () => {
    const problems = problemsOf(`
pipelines:
  - id: reports
    source: {backend: local, path: /source}
    destinations:
      - {id: archive, backend: local, path: /archive}
      - {id: web, backend: local, path: /web, foo: 1}
`);
    expect(problems).toEqual(["pipelines[0].destinations[1].foo: unknown key"]);
  });

  it("reports every unknown key of one mapping, at every level", () => {
    const problems = problemsOf(`
colour: blue
server: {http: {port: 80}}
pipelines:
  - id: reports
    sources: []
    source: {backend: local, path: /source, recursive: true}
    destinations:
      - {id: archive, backend: local, path: /archive, foo: 1, bar: 2, "odd key": 3}
`);
    expect(problems.sort()).toEqual(
      [
        "colour: unknown key",
        "server.http.port: unknown key",
        "pipelines[0].sources: unknown key",
        "pipelines[0].source.recursive: unknown key",
        "pipelines[0].destinations[0].foo: unknown key",
        "pipelines[0].destinations[0].bar: unknown key",
        'pipelines[0].destinations[0]["odd key"]: unknown key',
      ].sort(),
    );
  });

  it("treats __proto__ as an ordinary unknown key", () => {
    const problems = problemsOf(`${MINIMAL}__proto__: {polluted: true}\n`);
    expect(problems).toEqual(["__proto__: unknown key"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("reports schema problems and cross-key problems together", () => {
    const error = configError(() =>
      parseConfig(
        `
server: {http: {retention: forever}}
pipelines:
  - id: reports
    source: {backend: local}
    destinations:
      - {id: archive, backend: local, path: /a, reconciliation: {mode: append}, extra: 1}
      - {id: archive, backend: s3, bucket: reports, path: /b}
      - {id: web, backend: local, path: /web, publish: {html: true}}
`,
        { sourceName: "distributor.yml" },
      ),
    );
    expect(error.issues).toEqual([
      'server.http.retention must be a duration such as 500ms, 45s, 30m, 1h30m or 168h (invalid duration "forever")',
      "pipelines[0].destinations[0].reconciliation.mode must be replace or merge",
      "pipelines[0].destinations[0].extra: unknown key",
      "pipelines[0].source.path is required for the local backend",
      'pipelines[0].destinations[1].id must be unique: "archive" is also the id of pipelines[0].destinations[0]',
      "pipelines[0].destinations[1].path is valid only for the local and ssh backends",
      "pipelines[0].destinations[2].publish.html requires transform.markdown_to_html.enabled: true",
    ]);
    expect(error.message).toBe(
      [
        "distributor.yml: 7 configuration problems:",
        ...error.issues.map((issue) => `  - ${issue}`),
      ].join("\n"),
    );
    expect(error.sourceName).toBe("distributor.yml");
  });

  it("names the file before a single problem", () => {
    const error = configError(() =>
      parseConfig(MINIMAL.replace("path: /srv/reports/archive", "path: 7"), {
        sourceName: "distributor.yml",
      }),
    );
    expect(error.message).toBe(
      "distributor.yml: pipelines[0].destinations[0].path must be a string",
    );
  });

  it("keeps checking the other items of a list when one is not a mapping", () => {
    const problems = problemsOf(`
upload_tokens: [{id: reporter, token_env: TOKEN, allow_pipelines: [ingest, 5]}]
pipelines:
  - just a string
  - id: ingest
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local}
`);
    expect(problems).toEqual([
      "upload_tokens[0].allow_pipelines[1] must be a string",
      "pipelines[0] must be a mapping",
      "pipelines[1].destinations[0].path is required for the local backend",
    ]);
  });

  it("requires the document to be a mapping", () => {
    expect(problemsOf("- id: reports\n")).toEqual(["the configuration must be a mapping"]);
  });

  it("reports an empty document as having no pipelines", () => {
    expect(problemsOf("")).toEqual(["pipelines must list at least one pipeline"]);
  });
});

describe("parseConfig YAML errors", () => {
  it("names the file, line and column of a syntax error", () => {
    const error = configError(() =>
      parseConfig("pipelines:\n  - id: reports\n    source: {backend: local\n", {
        sourceName: "broken.yml",
      }),
    );
    expect(error.message).toMatch(/^broken\.yml: YAML syntax error at line \d+, column \d+: /);
    expect(error.issues.length).toBeGreaterThan(0);
  });

  it("rejects a duplicate key with its position", () => {
    const error = configError(() =>
      parseConfig(`${MINIMAL}pipelines: []\n`, { sourceName: "dup.yml" }),
    );
    expect(error.message).toBe(
      "dup.yml: YAML syntax error at line 11, column 1: Map keys must be unique",
    );
  });

  it("rejects a bad indentation with its position", () => {
    const error = configError(() =>
      parseConfig("server:\n  http:\n    listen: a\n   workers: 2\n", { sourceName: "x.yml" }),
    );
    expect(error.issues[0]).toMatch(/^YAML syntax error at line 4, column \d+: /);
  });

  it("rejects several documents in one file", () => {
    const error = configError(() => parseConfig(`${MINIMAL}---\n${MINIMAL}`));
    expect(error.message).toMatch(
      /^config: YAML syntax error at line 11, column 1: Source contains multiple documents/,
    );
  });

  it("rejects unknown tags", () => {
    const error = configError(() => parseConfig("secrets: {directory: !vault secret/path}\n"));
    expect(error.issues).toEqual(["YAML error at line 1, column 22: Unresolved tag: !vault"]);
  });

  it("rejects an alias without an anchor, with its position", () => {
    const error = configError(() => parseConfig("server:\n  http: *settings\n"));
    expect(error.issues).toEqual(["YAML error at line 2, column 9: unknown alias *settings"]);
  });

  it("stops alias expansion that grows out of bounds", () => {
    const levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let level = 1; level < 8; level += 1) {
      const previous = String.fromCharCode(96 + level);
      const name = String.fromCharCode(97 + level);
      levels.push(`${name}: &${name} [${Array(10).fill(`*${previous}`).join(", ")}]`);
    }
    const error = configError(() => parseConfig(`${levels.join("\n")}\n`));
    expect(error.issues).toEqual([
      "YAML error: Excessive alias count indicates a resource exhaustion attack",
    ]);
  });

  it("keeps YAML 1.1 booleans such as yes as strings", () => {
    const problems = problemsOf(
      MINIMAL.replace("path: /srv/reports/archive", "path: /a\n        publish: {html: yes}"),
    );
    expect(problems).toEqual(["pipelines[0].destinations[0].publish.html must be true or false"]);
  });
});

describe("loadConfig", () => {
  let directory: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), "distributor-config-"));
  });

  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it("reads a file relative to cwd and resolves relative local paths against cwd", async () => {
    await mkdir(join(directory, "etc"));
    await writeFile(
      join(directory, "etc", "distributor.yml"),
      `
server: {http: {staging_directory: ./staging}}
secrets: {directory: run/secrets}
pipelines:
  - id: reports
    source: {backend: local, path: spool/reports}
    destinations:
      - {id: archive, backend: local, path: ../published/archive}
      - {id: absolute, backend: local, path: /srv/reports/../archive}
      - {id: home, backend: local, path: ~/published}
      - {id: remote, backend: ssh, host: example.com, user: me, path: relative/root, private_key_file: keys/id}
`,
    );
    const config = await loadConfig("etc/distributor.yml", {
      cwd: directory,
      env: { HOME: "/home/operator" },
    });
    expect(config.sourceName).toBe("etc/distributor.yml");
    expect(config.server.http.stagingDirectory).toBe(join(directory, "staging"));
    expect(config.secrets.directory).toBe(join(directory, "run", "secrets"));
    const pipeline = config.pipelines[0];
    expect(pipeline?.source).toEqual({
      backend: "local",
      path: join(directory, "spool", "reports"),
    });
    expect(pipeline?.destinations.map((destination) => destination.location)).toEqual([
      { backend: "local", path: join(directory, "..", "published", "archive"), fsync: true },
      { backend: "local", path: "/srv/archive", fsync: true },
      { backend: "local", path: "/home/operator/published", fsync: true },
      {
        backend: "ssh",
        host: "example.com",
        port: 22,
        user: "me",
        path: "relative/root",
        privateKeyFile: join(directory, "keys", "id"),
        knownHostsFile: "/home/operator/.ssh/known_hosts",
        hostKeyPolicy: "strict",
        fsync: true,
      },
    ]);
  });

  it("accepts an absolute path and names the file in validation errors", async () => {
    const file = join(directory, "bad.yml");
    await writeFile(
      file,
      MINIMAL.replace("backend: local\n      path: /var", "backend: ftp\n      path: /var"),
    );
    await expect(loadConfig(file)).rejects.toThrow(
      new ConfigError(file, ["pipelines[0].source.backend must be local, ssh, s3 or http_upload"]),
    );
  });

  it("fails with a ConfigError naming a missing file", async () => {
    const error = await loadConfig("missing.yml", { cwd: directory }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      "missing.yml: cannot read the configuration file: no such file",
    );
  });

  it("refuses a directory", async () => {
    await mkdir(join(directory, "conf.yml"));
    await expect(loadConfig("conf.yml", { cwd: directory })).rejects.toThrow(
      "conf.yml: the configuration path is not a regular file",
    );
  });

  it("refuses a file that is not UTF-8", async () => {
    await writeFile(join(directory, "latin1.yml"), Buffer.from([0x61, 0x3a, 0x20, 0xe9, 0x0a]));
    await expect(loadConfig("latin1.yml", { cwd: directory })).rejects.toThrow(
      "latin1.yml: the configuration file is not valid UTF-8",
    );
  });

  it("refuses a file too large to be a configuration", async () => {
    await writeFile(join(directory, "huge.yml"), Buffer.alloc(4 * 1024 * 1024 + 1, 0x20));
    await expect(loadConfig("huge.yml", { cwd: directory })).rejects.toThrow(
      "huge.yml: the configuration file is larger than 4194304 bytes",
    );
  });

  it("names the file in a YAML syntax error", async () => {
    await writeFile(join(directory, "syntax.yml"), "pipelines:\n  - id: [reports\n");
    await expect(loadConfig("syntax.yml", { cwd: directory })).rejects.toThrow(
      /^syntax\.yml: YAML syntax error at line \d+, column \d+: /,
    );
  });
});

describe("anchors shared through merge keys", () => {
  it("merges a top-level x- block into destinations, each key overridable", () => {
    const config = parseConfig(
      `x-s3: &s3
  backend: s3
  bucket: shared
  region: eu-west-1
pipelines:
  - id: reports
    source: {backend: local, path: /srv/src}
    destinations:
      - id: one
        <<: *s3
        prefix: one
      - id: two
        <<: *s3
        bucket: other
`,
      { sourceName: "merge.yml", cwd: "/work" },
    );
    expect(config.pipelines[0]?.destinations.map((d) => d.location)).toEqual([
      expect.objectContaining({ backend: "s3", bucket: "shared", prefix: "one" }),
      expect.objectContaining({ backend: "s3", bucket: "other", region: "eu-west-1" }),
    ]);
  });

  it("still refuses an unknown top-level key that is not an x- extension", () => {
    expect(() =>
      parseConfig("s3: {}\npipelines: []\n", { sourceName: "bad.yml", cwd: "/work" }),
    ).toThrow(/s3/);
  });
});
