import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { parseConfig } from "../../src/config/index.js";
import { configText, destinationText, onlyProblem, problemsOf } from "./helpers.js";

const D = "pipelines[0].destinations[0]";

/** Pipelines `ingest` (http_upload source, plus `source` fields) and `reports` (local source). */
function uploadConfig(tokens: unknown, source: Record<string, unknown> = {}): string {
  return stringify({
    upload_tokens: tokens,
    pipelines: [
      {
        id: "ingest",
        source: { backend: "http_upload", ...source },
        destinations: [{ id: "archive", backend: "local", path: "/in" }],
      },
      {
        id: "reports",
        source: { backend: "local", path: "/source" },
        destinations: [{ id: "archive", backend: "local", path: "/out" }],
      },
    ],
  });
}

const TOKENS = [{ id: "reporter", token_env: "T", allow_pipelines: ["ingest"] }];

describe("pipelines", () => {
  it.each([
    ["missing", "server: {}\n", "pipelines must list at least one pipeline"],
    ["empty", "pipelines: []\n", "pipelines must list at least one pipeline"],
    ["not a list", "pipelines: {id: reports}\n", "pipelines must be a list"],
  ])("requires a list of pipelines (%s)", (_name, text, message) => {
    expect(onlyProblem(text)).toBe(message);
  });

  it("requires a pipeline id", () => {
    expect(onlyProblem(configText({}, { id: undefined }))).toBe("pipelines[0].id is required");
  });

  it.each(["bad id", "-reports", ".hidden", "a/b", "x".repeat(129), ""])(
    "rejects the pipeline id %j",
    (id) => {
      expect(onlyProblem(configText({}, { id }))).toBe(
        'pipelines[0].id must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit',
      );
    },
  );

  it.each(["reports", "Reports.2026_06-04", "9", "x".repeat(128)])(
    "accepts the pipeline id %j",
    (id) => {
      expect(parseConfig(configText({}, { id })).pipelines[0]?.id).toBe(id);
    },
  );

  it("requires unique pipeline ids", () => {
    const text = `
pipelines:
  - {id: reports, source: {backend: local, path: /a}, destinations: [{id: x, backend: local, path: /x}]}
  - {id: other, source: {backend: local, path: /b}, destinations: [{id: x, backend: local, path: /y}]}
  - {id: reports, source: {backend: local, path: /c}, destinations: [{id: x, backend: local, path: /z}]}
`;
    expect(onlyProblem(text)).toBe(
      'pipelines[2].id must be unique: "reports" is also the id of pipelines[0]',
    );
  });

  it("requires a source", () => {
    expect(onlyProblem(configText({}, { source: undefined }))).toBe(
      "pipelines[0].source is required",
    );
  });

  it("requires a source backend", () => {
    expect(onlyProblem(configText({}, { source: { path: "/source" } }))).toBe(
      "pipelines[0].source.backend is required",
    );
  });

  it("rejects an unknown source backend", () => {
    expect(onlyProblem(configText({}, { source: { backend: "ftp", path: "/source" } }))).toBe(
      "pipelines[0].source.backend must be local, ssh, s3 or http_upload",
    );
  });

  it.each([
    ["missing", undefined],
    ["empty", []],
  ])("requires at least one destination (%s)", (_name, destinations) => {
    expect(onlyProblem(configText({}, { destinations }))).toBe(
      "pipelines[0].destinations must list at least one destination",
    );
  });

  it("requires a mapping for each destination", () => {
    expect(onlyProblem(configText({}, { destinations: ["archive"] }))).toBe(
      "pipelines[0].destinations[0] must be a mapping",
    );
  });
});

describe("destinations", () => {
  it("requires a destination id", () => {
    expect(onlyProblem(configText({ id: undefined }))).toBe(`${D}.id is required`);
  });

  it("rejects an invalid destination id", () => {
    expect(onlyProblem(configText({ id: "web site" }))).toMatch(
      /^pipelines\[0\]\.destinations\[0\]\.id must be 1 to 128/,
    );
  });

  it("requires destination ids to be unique within a pipeline", () => {
    const text = configText(
      {},
      {
        destinations: [
          { id: "archive", backend: "local", path: "/a" },
          { id: "web", backend: "local", path: "/b" },
          { id: "web", backend: "local", path: "/c" },
        ],
      },
    );
    expect(onlyProblem(text)).toBe(
      'pipelines[0].destinations[2].id must be unique: "web" is also the id of pipelines[0].destinations[1]',
    );
  });

  it("allows the same destination id in different pipelines", () => {
    const text = `
pipelines:
  - {id: a, source: {backend: local, path: /a}, destinations: [{id: archive, backend: local, path: /x}]}
  - {id: b, source: {backend: local, path: /b}, destinations: [{id: archive, backend: local, path: /y}]}
`;
    expect(parseConfig(text).pipelines).toHaveLength(2);
  });

  it("requires a destination backend", () => {
    expect(onlyProblem(configText({ backend: undefined }))).toBe(`${D}.backend is required`);
  });

  it("accepts http_upload only as a source", () => {
    expect(onlyProblem(destinationText({ backend: "http_upload" }))).toBe(
      `${D}.backend must be local, ssh or s3 (http_upload is valid only as a source)`,
    );
  });

  it("rejects an unknown destination backend", () => {
    expect(onlyProblem(destinationText({ backend: "gcs", bucket: "b" }))).toBe(
      `${D}.backend must be local, ssh or s3`,
    );
  });
});

describe("backend-specific keys", () => {
  it.each([
    [{ backend: "local", path: "/a", bucket: "b" }, `${D}.bucket is valid only for the s3 backend`],
    [{ backend: "local", path: "/a", host: "h" }, `${D}.host is valid only for the ssh backend`],
    [{ backend: "local", path: "/a", port: 22 }, `${D}.port is valid only for the ssh backend`],
    [
      { backend: "local", path: "/a", region: "eu" },
      `${D}.region is valid only for the s3 backend`,
    ],
    [
      { backend: "local", path: "/a", timeouts: { request: "5s" } },
      `${D}.timeouts is valid only for the ssh and s3 backends`,
    ],
    [
      { backend: "s3", bucket: "b", timeouts: { request: "0s" } },
      `${D}.timeouts.request must be greater than zero`,
    ],
    [{ backend: "s3", bucket: "b", timeouts: { read: "5s" } }, `${D}.timeouts.read: unknown key`],
    [
      { backend: "s3", bucket: "b", path: "/a" },
      `${D}.path is valid only for the local and ssh backends`,
    ],
    [
      { backend: "s3", bucket: "b", known_hosts_file: "/k" },
      `${D}.known_hosts_file is valid only for the ssh backend`,
    ],
    [
      { backend: "ssh", host: "h", user: "u", path: "/p", prefix: "x" },
      `${D}.prefix is valid only for the s3 backend`,
    ],
    [
      {
        backend: "ssh",
        host: "h",
        user: "u",
        path: "/p",
        credentials: { access_key_id_env: "A", secret_access_key_env: "B" },
      },
      `${D}.credentials is valid only for the s3 backend`,
    ],
    [
      { backend: "ssh", host: "h", user: "u", path: "/p", force_path_style: true },
      `${D}.force_path_style is valid only for the s3 backend`,
    ],
    [
      { backend: "s3", bucket: "b", fsync: false },
      `${D}.fsync is valid only for the local and ssh backends`,
    ],
    [{ backend: "local", path: "/a", fsync: "no" }, `${D}.fsync must be true or false`],
  ])("rejects a key of another backend: %j", (fields, message) => {
    expect(onlyProblem(destinationText(fields))).toBe(message);
  });

  it("rejects fsync on a source, which never writes", () => {
    expect(
      onlyProblem(configText({}, { source: { backend: "local", path: "/s", fsync: false } })),
    ).toContain("pipelines[0].source.fsync");
  });

  it("rejects max_upload_size on a source that is not http_upload", () => {
    expect(
      onlyProblem(
        configText({}, { source: { backend: "local", path: "/s", max_upload_size: "1MB" } }),
      ),
    ).toBe("pipelines[0].source.max_upload_size is valid only for the http_upload backend");
  });

  it("rejects storage keys on an http_upload source", () => {
    const problems = problemsOf(uploadConfig(TOKENS, { path: "/in", bucket: "b" }));
    expect(problems).toEqual([
      "pipelines[0].source.path is valid only for the local and ssh backends",
      "pipelines[0].source.bucket is valid only for the s3 backend",
    ]);
  });

  it("rejects max_upload_size on a destination as an unknown key", () => {
    expect(onlyProblem(configText({ max_upload_size: "1MB" }))).toBe(
      `${D}.max_upload_size: unknown key`,
    );
  });
});

describe("required backend keys", () => {
  it.each([
    [{ backend: "local" }, [`${D}.path is required for the local backend`]],
    [
      { backend: "ssh" },
      [
        `${D}.host is required for the ssh backend`,
        `${D}.user is required for the ssh backend`,
        `${D}.path is required for the ssh backend`,
      ],
    ],
    [{ backend: "ssh", host: "h", user: "u" }, [`${D}.path is required for the ssh backend`]],
    [{ backend: "s3" }, [`${D}.bucket is required for the s3 backend`]],
    [{ backend: "local", path: "" }, [`${D}.path must not be empty`]],
  ])("requires the keys of %j", (fields, messages) => {
    expect(problemsOf(destinationText(fields))).toEqual(messages);
  });

  it("requires the keys of a source backend", () => {
    expect(onlyProblem(configText({}, { source: { backend: "s3", prefix: "in" } }))).toBe(
      "pipelines[0].source.bucket is required for the s3 backend",
    );
  });
});

describe("ssh keys", () => {
  const ssh = { backend: "ssh", host: "files.example.com", user: "publisher", path: "/srv" };

  it.each([0, 65_536, 22.5, "22"])("rejects the port %j", (port) => {
    expect(onlyProblem(destinationText({ ...ssh, port }))).toMatch(
      /^pipelines\[0\]\.destinations\[0\]\.port must be (between 1 and 65535|at most 65535|a whole number)$/,
    );
  });

  it("rejects an unknown host_key_policy", () => {
    expect(onlyProblem(destinationText({ ...ssh, host_key_policy: "yes" }))).toBe(
      `${D}.host_key_policy must be strict or accept_new`,
    );
  });

  it("rejects a private key given both as a file and as a secret", () => {
    expect(
      onlyProblem(destinationText({ ...ssh, private_key_file: "/k", private_key_env: "SSH_KEY" })),
    ).toBe(
      `${D}.private_key_env cannot be combined with private_key_file; choose one source for the private key`,
    );
  });

  it("requires a private key for passphrase_env", () => {
    expect(onlyProblem(destinationText({ ...ssh, passphrase_env: "SSH_PASSPHRASE" }))).toBe(
      `${D}.passphrase_env requires private_key_file or private_key_env`,
    );
  });

  it("rejects a secret reference that is not an environment variable name", () => {
    expect(onlyProblem(destinationText({ ...ssh, password_env: "../etc/passwd" }))).toBe(
      `${D}.password_env must be an environment variable name (letters, digits and _, not starting with a digit)`,
    );
  });

  it.each([
    ["password", "password_env"],
    ["passphrase", "passphrase_env"],
    ["private_key", "private_key_env or private_key_file"],
  ])("rejects a literal %s", (key, reference) => {
    const problem = onlyProblem(destinationText({ ...ssh, [key]: "hunter2" }));
    expect(problem).toMatch(
      new RegExp(`^pipelines\\[0\\]\\.destinations\\[0\\]\\.${key} is not allowed: `),
    );
    expect(problem).toContain(`name it with ${reference}`);
  });

  it("rejects a host with a path in it", () => {
    expect(onlyProblem(destinationText({ ...ssh, host: "example.com/x" }))).toBe(
      `${D}.host must be a host name or address without spaces or /`,
    );
  });
});

describe("s3 keys", () => {
  const s3 = { backend: "s3", bucket: "reports" };

  it.each([
    [
      { access_key_id_env: "S3_KEY" },
      "must set both access_key_id_env and secret_access_key_env, or neither",
    ],
    [
      { secret_access_key_env: "S3_SECRET" },
      "must set both access_key_id_env and secret_access_key_env, or neither",
    ],
    [
      {},
      "must set access_key_id_env and secret_access_key_env (leave credentials out to use the default AWS credential chain)",
    ],
  ])("requires both credential references or neither: %j", (credentials, message) => {
    expect(onlyProblem(destinationText({ ...s3, credentials }))).toBe(
      `${D}.credentials ${message}`,
    );
  });

  it("rejects literal credentials", () => {
    const problems = problemsOf(
      destinationText({ ...s3, credentials: { access_key_id: "AKIA", secret_access_key: "x" } }),
    );
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(
      /^pipelines\[0\]\.destinations\[0\]\.credentials\.access_key_id is not allowed: .*access_key_id_env$/,
    );
    expect(problems[1]).toMatch(
      /^pipelines\[0\]\.destinations\[0\]\.credentials\.secret_access_key is not allowed: .*secret_access_key_env$/,
    );
  });

  it.each([
    ["/reports", "path is absolute"],
    ["reports/", "path has a trailing slash"],
    ["a//b", "path has an empty segment"],
    ["a/../b", 'path has a ".." segment'],
  ])("rejects the prefix %j", (prefix, problem) => {
    expect(onlyProblem(destinationText({ ...s3, prefix }))).toBe(
      `${D}.prefix must be a clean relative path such as reports/daily (${problem})`,
    );
  });

  it("accepts an empty prefix as the bucket root", () => {
    const location = parseConfig(destinationText({ ...s3, prefix: "" })).pipelines[0]
      ?.destinations[0]?.location;
    expect(location).toMatchObject({ backend: "s3", prefix: "" });
  });

  it.each([
    "localhost:9000",
    "ftp://files.example.com",
    "not a url",
    "https://user:pw@s3.example.com",
  ])("rejects the endpoint %j", (endpoint) => {
    expect(onlyProblem(destinationText({ ...s3, endpoint }))).toMatch(
      /^pipelines\[0\]\.destinations\[0\]\.endpoint must (be an absolute http or https URL|not contain a user name or password)$/,
    );
  });

  it("rejects a bucket name with a slash", () => {
    expect(onlyProblem(destinationText({ ...s3, bucket: "reports/daily" }))).toBe(
      `${D}.bucket must be a bucket name without / or spaces`,
    );
  });

  it("rejects a non-boolean force_path_style", () => {
    expect(onlyProblem(destinationText({ ...s3, force_path_style: "yes" }))).toBe(
      `${D}.force_path_style must be true or false`,
    );
  });
});

describe("upload tokens", () => {
  it("requires upload_tokens when a source is http_upload", () => {
    expect(onlyProblem(uploadConfig(undefined))).toBe(
      "upload_tokens must list at least one token when a pipeline has an http_upload source",
    );
    expect(onlyProblem(uploadConfig([]))).toBe(
      "upload_tokens must list at least one token when a pipeline has an http_upload source",
    );
  });

  it("accepts a complete token", () => {
    const config = parseConfig(
      uploadConfig([{ id: "reporter", token_env: "UPLOAD_TOKEN", allow_pipelines: ["ingest"] }]),
    );
    expect(config.uploadTokens).toEqual([
      { id: "reporter", tokenEnv: "UPLOAD_TOKEN", allowPipelines: ["ingest"] },
    ]);
  });

  it("rejects a literal token with a pointer to token_env", () => {
    expect(
      onlyProblem(
        uploadConfig([
          {
            id: "reporter",
            token: "secret",
            token_env: "UPLOAD_TOKEN",
            allow_pipelines: ["ingest"],
          },
        ]),
      ),
    ).toBe(
      "upload_tokens[0].token is not allowed: configuration files must not contain upload tokens; store it in an environment variable or a file in secrets.directory and name it with token_env",
    );
  });

  it("requires token_env", () => {
    expect(onlyProblem(uploadConfig([{ id: "reporter", allow_pipelines: ["ingest"] }]))).toBe(
      "upload_tokens[0].token_env is required",
    );
  });

  it("requires a token id, unique", () => {
    const problems = problemsOf(
      uploadConfig([
        { token_env: "A", allow_pipelines: ["ingest"] },
        { id: "reporter", token_env: "B", allow_pipelines: ["ingest"] },
        { id: "reporter", token_env: "C", allow_pipelines: ["ingest"] },
      ]),
    );
    expect(problems).toEqual([
      "upload_tokens[0].id is required",
      'upload_tokens[2].id must be unique: "reporter" is also the id of upload_tokens[1]',
    ]);
  });

  it.each([undefined, []])("requires allow_pipelines (%j)", (allow) => {
    expect(
      onlyProblem(uploadConfig([{ id: "reporter", token_env: "T", allow_pipelines: allow }])),
    ).toBe("upload_tokens[0].allow_pipelines must list at least one pipeline id");
  });

  it("requires allow_pipelines to name existing pipelines", () => {
    expect(
      onlyProblem(
        uploadConfig([{ id: "reporter", token_env: "T", allow_pipelines: ["ingest", "nope"] }]),
      ),
    ).toBe('upload_tokens[0].allow_pipelines[1] names unknown pipeline "nope"');
  });

  it("requires allow_pipelines to name http_upload pipelines", () => {
    expect(
      onlyProblem(uploadConfig([{ id: "reporter", token_env: "T", allow_pipelines: ["reports"] }])),
    ).toBe(
      'upload_tokens[0].allow_pipelines[0] names pipeline "reports", whose source is local, not http_upload',
    );
  });

  it("rejects a pipeline listed twice", () => {
    expect(
      onlyProblem(
        uploadConfig([{ id: "reporter", token_env: "T", allow_pipelines: ["ingest", "ingest"] }]),
      ),
    ).toBe('upload_tokens[0].allow_pipelines[1] lists pipeline "ingest" more than once');
  });

  it("rejects max_upload_size of zero or with an unknown unit", () => {
    const zero = uploadConfig(TOKENS, { max_upload_size: "0B" });
    expect(onlyProblem(zero)).toBe("pipelines[0].source.max_upload_size must be greater than zero");
    const unknown = uploadConfig(TOKENS, { max_upload_size: "20XB" });
    expect(onlyProblem(unknown)).toBe(
      'pipelines[0].source.max_upload_size must be a size such as 512KiB, 64MiB or 10GB (unknown unit "XB" in size "20XB")',
    );
  });
});

describe("publish and transform", () => {
  it("requires source or html to be published", () => {
    expect(onlyProblem(configText({ publish: { source: false } }))).toBe(
      `${D}.publish must enable source, html or both`,
    );
  });

  it("requires an enabled Markdown transform for html", () => {
    const message = `${D}.publish.html requires transform.markdown_to_html.enabled: true`;
    expect(onlyProblem(configText({ publish: { html: true } }))).toBe(message);
    expect(
      onlyProblem(
        configText({ publish: { html: true }, transform: { markdown_to_html: { mode: "index" } } }),
      ),
    ).toBe(message);
    expect(
      onlyProblem(
        configText({
          publish: { html: true },
          transform: { markdown_to_html: { enabled: false } },
        }),
      ),
    ).toBe(message);
  });

  it("accepts html only, with the transform enabled", () => {
    const destination = parseConfig(
      configText({
        publish: { source: false, html: true },
        transform: { markdown_to_html: { enabled: true } },
      }),
    ).pipelines[0]?.destinations[0];
    expect(destination?.publish).toEqual({ source: false, html: true });
  });

  it("rejects an unknown transform mode", () => {
    expect(
      onlyProblem(
        configText({ transform: { markdown_to_html: { enabled: true, mode: "inline" } } }),
      ),
    ).toBe(`${D}.transform.markdown_to_html.mode must be sidecar or index`);
  });

  it("rejects a non-boolean publish flag without guessing at the publish rule", () => {
    expect(onlyProblem(configText({ publish: { source: false, html: "true" } }))).toBe(
      `${D}.publish.html must be true or false`,
    );
  });
});

describe("path mapping and links", () => {
  it("rejects an unknown path mapping mode", () => {
    expect(onlyProblem(configText({ path_mapping: { mode: "flat" } }))).toBe(
      `${D}.path_mapping.mode must be preserve_relative or fixed`,
    );
  });

  it("accepts shared_root with fixed path mapping", () => {
    const destination = parseConfig(
      configText({ path_mapping: { mode: "fixed" }, state: { mode: "shared_root" } }),
    ).pipelines[0]?.destinations[0];
    expect([destination?.pathMapping.mode, destination?.state.mode]).toEqual([
      "fixed",
      "shared_root",
    ]);
  });

  it("requires links.base_url", () => {
    expect(onlyProblem(configText({ links: { primary: "html" } }))).toBe(
      `${D}.links.base_url is required when links is set`,
    );
  });

  it.each([
    ["/relative/path", "must be an absolute http or https URL"],
    ["ftp://files.example.com/", "must be an absolute http or https URL"],
    ["https://user:secret@example.com/", "must not contain a user name or password"],
    ["https://example.com/reports?x=1", "must not have a query or fragment"],
    ["https://example.com/reports#top", "must not have a query or fragment"],
  ])("rejects the base_url %j", (base_url, message) => {
    expect(onlyProblem(configText({ links: { base_url } }))).toBe(`${D}.links.base_url ${message}`);
  });

  it("rejects an unknown primary", () => {
    expect(
      onlyProblem(configText({ links: { base_url: "https://example.com/", primary: "first" } })),
    ).toBe(`${D}.links.primary must be html, source, auto or none`);
  });
});

describe("state, reconciliation, retention and transfer", () => {
  it("rejects an unknown state mode", () => {
    expect(onlyProblem(configText({ state: { mode: "shared" } }))).toBe(
      `${D}.state.mode must be single_owner or shared_root`,
    );
  });

  it("rejects an unknown reconciliation mode", () => {
    expect(onlyProblem(configText({ reconciliation: { mode: "append" } }))).toBe(
      `${D}.reconciliation.mode must be replace or merge`,
    );
  });

  it("requires older_than or keep_latest when pruning is enabled", () => {
    expect(onlyProblem(configText({ retention: { prune: { enabled: true } } }))).toBe(
      `${D}.retention.prune must set older_than or keep_latest when enabled is true`,
    );
  });

  it.each([
    [{ enabled: false }, { enabled: false }],
    [
      { enabled: true, older_than: "24h" },
      { enabled: true, olderThanMs: 86_400_000 },
    ],
    [
      { enabled: true, keep_latest: 0 },
      { enabled: true, keepLatest: 0 },
    ],
    [
      { enabled: true, keep_latest: 3 },
      { enabled: true, keepLatest: 3 },
    ],
    [
      { enabled: true, older_than: "168h", keep_latest: 3 },
      { enabled: true, olderThanMs: 604_800_000, keepLatest: 3 },
    ],
    [{ older_than: "1h" }, { enabled: false, olderThanMs: 3_600_000 }],
  ])("accepts the prune policy %j", (prune, expected) => {
    const destination = parseConfig(configText({ retention: { prune } })).pipelines[0]
      ?.destinations[0];
    expect(destination?.retention.prune).toEqual(expected);
  });

  it.each([
    [{ enabled: true, older_than: "0s" }, "retention.prune.older_than must be greater than zero"],
    [{ enabled: true, older_than: "-1h" }, "retention.prune.older_than must be greater than zero"],
    // Values are checked even while pruning is disabled, so enabling it later cannot surprise.
    [{ enabled: false, older_than: "0s" }, "retention.prune.older_than must be greater than zero"],
    [{ enabled: true, keep_latest: -1 }, "retention.prune.keep_latest must be zero or greater"],
    [{ enabled: true, keep_latest: 1.5 }, "retention.prune.keep_latest must be a whole number"],
    [
      { enabled: true, older_than: "forever" },
      'retention.prune.older_than must be a duration such as 500ms, 45s, 30m, 1h30m or 168h (invalid duration "forever")',
    ],
    [
      { enabled: true, older_than: "7d" },
      'retention.prune.older_than must be a duration such as 500ms, 45s, 30m, 1h30m or 168h (unknown unit "d" in duration "7d")',
    ],
    [{ enabled: "yes", keep_latest: 1 }, "retention.prune.enabled must be true or false"],
  ])("rejects the prune policy %j", (prune, message) => {
    expect(onlyProblem(configText({ retention: { prune } }))).toBe(`${D}.${message}`);
  });

  it.each([
    ["on_destination_same", "replace", "must be skip or fail"],
    ["on_destination_older", "overwrite", "must be replace, skip or fail"],
    ["on_destination_newer", "replace", "must be skip or fail"],
    ["on_conflict", "skip", "must be fail"],
  ])("rejects transfer.%s: %s", (key, value, message) => {
    expect(onlyProblem(configText({ transfer: { [key]: value } }))).toBe(
      `${D}.transfer.${key} ${message}`,
    );
  });
});

describe("transfers", () => {
  it("is the backend's default when absent, and the number given otherwise", () => {
    const [absent] = parseConfig(configText({})).pipelines[0]?.destinations ?? [];
    expect(absent?.transfers).toBeUndefined();
    const [given] = parseConfig(configText({ transfers: 32 })).pipelines[0]?.destinations ?? [];
    expect(given?.transfers).toBe(32);
  });

  it.each([
    [0, "transfers must be greater than zero"],
    [65, "transfers must be at most 64"],
    [2.5, "transfers must be a whole number"],
    ["8", "transfers must be a whole number"],
  ])("rejects transfers: %j", (value, message) => {
    expect(onlyProblem(configText({ transfers: value }))).toBe(`${D}.${message}`);
  });
});

describe("multipart", () => {
  const s3 = { backend: "s3", bucket: "reports", path: undefined };
  it("reaches an s3 destination's location", () => {
    const text = configText({ ...s3, multipart: { part_size: "16MiB", concurrency: 8 } });
    const [destination] = parseConfig(text).pipelines[0]?.destinations ?? [];
    expect(destination?.location).toMatchObject({
      backend: "s3",
      multipart: { partSize: 16 * 1024 * 1024, concurrency: 8 },
    });
  });

  it.each([
    [{ part_size: "4MiB" }, "multipart.part_size must be at least 5MiB"],
    [{ part_size: "6GiB" }, "multipart.part_size must be at most 5GiB"],
    [{ concurrency: 0 }, "multipart.concurrency must be greater than zero"],
    [{ concurrency: 17 }, "multipart.concurrency must be at most 16"],
  ])("rejects multipart %j", (multipart, message) => {
    expect(onlyProblem(configText({ ...s3, multipart }))).toBe(`${D}.${message}`);
  });

  it("is refused on a destination that does not upload in parts", () => {
    expect(onlyProblem(configText({ multipart: { concurrency: 2 } }))).toMatch(
      /multipart cannot be used by destination \w+: only the s3 backend uploads in parts \(its backend is local\)$/,
    );
  });
});

describe("layout", () => {
  it("defaults to in place, and keeps five releases under layout: releases", () => {
    const [plain] = parseConfig(configText({})).pipelines[0]?.destinations ?? [];
    expect(plain?.layout).toEqual({ mode: "in_place" });
    const [releases] =
      parseConfig(configText({ layout: "releases" })).pipelines[0]?.destinations ?? [];
    expect(releases?.layout).toEqual({ mode: "releases", keep: 5, promote: "auto" });
    const text = configText({ layout: "releases", releases: { keep: 2 } });
    expect(parseConfig(text).pipelines[0]?.destinations[0]?.layout).toEqual({
      mode: "releases",
      keep: 2,
      promote: "auto",
    });
    const staged = configText({
      layout: "releases",
      releases: {
        promote: "manual",
        preview_url: "https://preview.example.org/{release}/",
        keep_staged: 2,
      },
    });
    expect(parseConfig(staged).pipelines[0]?.destinations[0]?.layout).toEqual({
      mode: "releases",
      keep: 5,
      promote: "manual",
      previewUrl: "https://preview.example.org/{release}/",
      keepStaged: 2,
    });
  });

  it.each([
    [{ promote: "later" }, "releases.promote must be"],
    [
      { preview_url: "https://preview.example.org/" },
      "releases.preview_url must contain {release}",
    ],
    [
      { preview_url: "ftp://x/{release}" },
      "releases.preview_url must be an absolute http or https URL",
    ],
    [{ keep_staged: -1 }, "releases.keep_staged must be zero or greater"],
  ])("refuses the staging setting %j, naming the key", (releases, message) => {
    expect(() => parseConfig(configText({ layout: "releases", releases }))).toThrow(message);
  });

  it.each([
    [{ layout: "atomic" }, "layout must be in_place or releases"],
    [{ layout: "releases", releases: { keep: 0 } }, "releases.keep must be at least 1"],
    [{ releases: { keep: 3 } }, "releases applies only with layout: releases (destination"],
  ])("rejects %j", (fields, message) => {
    expect(onlyProblem(configText(fields))).toContain(`${D}.${message}`);
  });

  it("is refused where there are no symbolic links, or several owners", () => {
    const s3 = { backend: "s3", bucket: "reports", path: undefined, layout: "releases" };
    expect(onlyProblem(configText(s3))).toMatch(
      /layout releases cannot be used by destination \w+: its s3 backend has no symbolic links/,
    );
    expect(onlyProblem(configText({ layout: "releases", state: { mode: "shared_root" } }))).toMatch(
      /layout releases cannot be used by destination \w+ with state.mode: shared_root/,
    );
  });
});

describe("validation policy", () => {
  it.each([
    [{ unlisted_files: "allow" }, "unlisted_files must be reject or ignore"],
    [{ max_files: 0 }, "max_files must be greater than zero"],
    [{ max_files: "10" }, "max_files must be a whole number"],
    [{ max_total_size: "0B" }, "max_total_size must be greater than zero"],
    [{ max_total_size: 1000 }, "max_total_size must be a size such as 512KiB, 64MiB or 10GB"],
  ])("rejects %j", (validation, message) => {
    expect(onlyProblem(configText({}, { validation }))).toBe(`pipelines[0].validation.${message}`);
  });
});

describe("server and secrets", () => {
  it.each([
    [{ listen: "8080" }, "listen must be host:port, such as 127.0.0.1:8080 or [::1]:8080"],
    [
      { listen: "localhost:99999" },
      "listen must be host:port, such as 127.0.0.1:8080 or [::1]:8080",
    ],
    [{ listen: "::1:8080" }, "listen must be host:port, such as 127.0.0.1:8080 or [::1]:8080"],
    [{ retention: "0s" }, "retention must be greater than zero"],
    [
      { retention: "forever" },
      'retention must be a duration such as 500ms, 45s, 30m, 1h30m or 168h (invalid duration "forever")',
    ],
    [{ queue_size: 0 }, "queue_size must be greater than zero"],
    [{ workers: 0 }, "workers must be greater than zero"],
    [{ staging_directory: "" }, "staging_directory must not be empty"],
  ])("rejects server.http %j", (http, message) => {
    expect(onlyProblem(configText({}, {}, { server: { http } }))).toBe(`server.http.${message}`);
  });

  it.each(["127.0.0.1:0", ":8080", "[::1]:8080", "distributor.internal:443"])(
    "accepts listen %j",
    (listen) => {
      expect(
        parseConfig(configText({}, {}, { server: { http: { listen } } })).server.http.listen,
      ).toBe(listen);
    },
  );

  it("reads a postgres store with shared staging", () => {
    const config = parseConfig(
      configText(
        {},
        {},
        {
          server: {
            store: { backend: "postgres", url_env: "DATABASE_URL", claim_timeout: "15s" },
            staging: { backend: "local", path: "/srv/staging" },
          },
        },
      ),
    );
    expect(config.server.store).toMatchObject({
      backend: "postgres",
      urlEnv: "DATABASE_URL",
      claimTimeoutMs: 15_000,
    });
    expect(config.server.staging).toEqual({ backend: "local", path: "/srv/staging" });
    const s3 = parseConfig(
      configText(
        {},
        {},
        { server: { staging: { backend: "s3", bucket: "uploads", prefix: "staging" } } },
      ),
    );
    expect(s3.server.staging).toMatchObject({
      backend: "s3",
      bucket: "uploads",
      prefix: "staging",
    });
  });

  it.each([
    [
      { store: { backend: "postgres", url_env: "DATABASE_URL" } },
      "server.staging is required when server.store.backend is postgres: every instance must read the bundles another accepted",
    ],
    [
      { store: { backend: "postgres" }, staging: { backend: "local", path: "/s" } },
      "server.store.url_env is required when backend is postgres",
    ],
    [
      {
        store: { backend: "postgres", url_env: "D", url: "postgres://u:p@db/x" },
        staging: { backend: "local", path: "/s" },
      },
      "server.store.url is not allowed: configuration files must not contain database URLs; store it in an environment variable or a file in secrets.directory and name it with url_env",
    ],
    [
      { store: { url_env: "DATABASE_URL" } },
      "server.store.url_env is only valid when backend is postgres",
    ],
    [
      { store: { claim_timeout: "5s" } },
      "server.store.claim_timeout is only valid when backend is postgres",
    ],
    [
      {
        store: { backend: "postgres", url_env: "D", path: "/x" },
        staging: { backend: "local", path: "/s" },
      },
      "server.store.path is only valid when backend is embedded",
    ],
    [{ staging: { backend: "local" } }, "server.staging.path is required for the local backend"],
    [{ staging: { backend: "s3" } }, "server.staging.bucket is required for the s3 backend"],
    [{ staging: { path: "/s" } }, "server.staging.backend is required"],
    [{ staging: { backend: "nfs", path: "/s" } }, "server.staging.backend must be local or s3"],
    [
      { staging: { backend: "local", path: "/s", bucket: "b" } },
      "server.staging.bucket is valid only for the s3 backend",
    ],
  ])("rejects server %j", (server, message) => {
    expect(onlyProblem(configText({}, {}, { server }))).toBe(message);
  });

  it("rejects a secrets directory that is not a string", () => {
    expect(onlyProblem(configText({}, {}, { secrets: { directory: ["/run/secrets"] } }))).toBe(
      "secrets.directory must be a string",
    );
  });
});

describe("destinations sharing a location", () => {
  const twoPipelines = (a: Record<string, unknown>, b: Record<string, unknown>) =>
    stringify({
      pipelines: [
        { id: "p", source: { backend: "local", path: "/s1" }, destinations: [{ id: "d", ...a }] },
        { id: "q", source: { backend: "local", path: "/s2" }, destinations: [{ id: "e", ...b }] },
      ],
    });

  it("is a configuration error naming both for single-owner destinations", () => {
    const problems = problemsOf(
      twoPipelines(
        { backend: "local", path: "/srv/out" },
        { backend: "local", path: "/srv/x/../out/" },
      ),
    );
    expect(problems).toEqual([
      "pipelines[1].destinations[0] resolves to the same location as pipelines[0].destinations[0] (local /srv/out); two destinations may share a location only when both set state.mode: shared_root",
    ]);
  });

  it("compares host and path over SSH, and bucket and prefix on S3", () => {
    const ssh = { backend: "ssh", host: "Files.example", user: "u", path: "/srv/out" };
    expect(
      problemsOf(twoPipelines(ssh, { ...ssh, host: "files.example", user: "v" })),
    ).toHaveLength(1);
    expect(() => parseConfig(twoPipelines(ssh, { ...ssh, port: 2222 }))).not.toThrow();
    const s3 = { backend: "s3", bucket: "b", prefix: "site" };
    expect(problemsOf(twoPipelines(s3, { ...s3, region: "eu-west-1" }))).toHaveLength(1);
    expect(() => parseConfig(twoPipelines(s3, { ...s3, prefix: "other" }))).not.toThrow();
  });

  it("is allowed when both use shared_root", () => {
    const shared = { backend: "local", path: "/srv/out", state: { mode: "shared_root" } };
    expect(() => parseConfig(twoPipelines(shared, shared))).not.toThrow();
    expect(problemsOf(twoPipelines(shared, { backend: "local", path: "/srv/out" }))).toHaveLength(
      1,
    );
  });
});

describe("metadata rules", () => {
  const S3 = { backend: "s3", bucket: "site", path: undefined };

  it("accepts ordered rules on an s3 destination", () => {
    const config = parseConfig(
      configText({
        ...S3,
        metadata: [
          { match: "**/*.html", cache_control: "max-age=60", content_encoding: "gzip" },
          { match: "assets/**", cache_control: "public, max-age=31536000, immutable" },
          { match: "**/*.pdf", content_disposition: "attachment" },
          { match: "raw/**" },
        ],
      }),
    );
    expect(config.pipelines[0]?.destinations[0]?.metadata).toHaveLength(4);
  });

  it.each([
    ["local", { backend: "local", path: "/a" }],
    ["ssh", { backend: "ssh", host: "h", user: "u", path: "p", private_key_file: "/k" }],
  ])("refuses rules on a %s destination, naming it", (backend, location) => {
    expect(
      onlyProblem(
        configText({ ...location, metadata: [{ match: "**", cache_control: "no-cache" }] }),
      ),
    ).toBe(
      `${D}.metadata cannot be used by destination archive: its ${backend} backend cannot store object metadata (Cache-Control, Content-Type, Content-Disposition, Content-Encoding); only the s3 backend can`,
    );
  });

  it.each([
    [
      { match: "a**" },
      `${D}.metadata[0].match must be a glob pattern: it uses ** inside the segment "a**"; ** must be a whole segment`,
    ],
    [
      { match: "[abc" },
      `${D}.metadata[0].match must be a glob pattern: it has an unclosed [ in "[abc"`,
    ],
    [
      { match: "/abs" },
      `${D}.metadata[0].match must be a glob pattern: it must be relative (no leading /)`,
    ],
    [{ cache_control: "no-cache" }, `${D}.metadata[0].match is required`],
    [{ match: "**", cache: "no-cache" }, `${D}.metadata[0].cache: unknown key`],
    [
      { match: "**", content_encoding: "zstd" },
      `${D}.metadata[0].content_encoding must be gzip or br`,
    ],
    [
      { match: "**", cache_control: "max-age=60\nX-Evil: 1" },
      `${D}.metadata[0].cache_control must be an HTTP header value: visible ASCII characters and inner spaces`,
    ],
  ])("refuses the rule %j", (rule, message) => {
    const problems = problemsOf(configText({ ...S3, metadata: [rule] }));
    expect(problems.some((problem) => problem.startsWith(message))).toBe(true);
  });

  it("refuses metadata that is not a list", () => {
    expect(onlyProblem(configText({ ...S3, metadata: { match: "**" } }))).toBe(
      `${D}.metadata must be a list`,
    );
  });
});
