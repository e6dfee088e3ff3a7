/**
 * What each key of the configuration means, as editors show it on hover and completion. Paths
 * start at the document root or at one of the schema's definitions (`pipeline`, `source`,
 * `destination`, `upload_token`); `location.*` applies to both sources and destinations. The
 * generator fails on a path the schema does not have, and a test fails on a key without one.
 * docs/config.md is the long form.
 */
const location: Record<string, string> = {
  path: "local: root directory (relative paths resolve against the working directory). ssh: root directory on the server, kept as written.",
  host: "ssh: server name or address.",
  port: "ssh: port, default 22.",
  user: "ssh: login name.",
  private_key_file: "ssh: private key file on this machine (not with private_key_env).",
  private_key_env: "ssh: secret reference holding the private key (not with private_key_file).",
  passphrase_env: "ssh: secret reference holding the private key's passphrase.",
  password_env: "ssh: secret reference holding the password.",
  known_hosts_file: "ssh: host keys the server is checked against, default ~/.ssh/known_hosts.",
  host_key_policy:
    "ssh: strict (default) refuses unknown hosts; accept_new records an unknown host's key on first contact and still refuses a changed one.",
  bucket: "s3: bucket name.",
  prefix: "s3: key prefix everything lives below, a clean relative path; default the bucket root.",
  region: "s3: region, default us-east-1.",
  endpoint: "s3: endpoint of an S3-compatible service, such as http://127.0.0.1:9000.",
  force_path_style: "s3: address the bucket in the URL path (most self-hosted stores need true).",
  timeouts:
    "ssh and s3: bounded waits. A hung server fails the run within them, leaving its lease recoverable.",
  "timeouts.connect":
    "How long to wait for a connection (and, for ssh, the handshake). Default 10s.",
  "timeouts.request":
    "How long one request may go without an answer or progress before it fails. Default 30s.",
  credentials:
    "s3: secret references for both keys, or leave it out to use the AWS SDK's default credential chain.",
  "credentials.access_key_id_env": "Secret reference holding the access key id.",
  "credentials.secret_access_key_env": "Secret reference holding the secret access key.",
};

export const CONFIG_DESCRIPTIONS: Readonly<Record<string, string>> = {
  server: "Settings of distributor serve.",
  "server.http": "The HTTP upload server; every key is optional.",
  "server.http.listen":
    "host:port to listen on, default 127.0.0.1:8080; [::1]:8080 for IPv6, :8080 for every interface, port 0 for a free one.",
  "server.http.retention":
    "How long the status record of a finished upload run (and its idempotency key) is kept (a duration such as 24h, the default).",
  "server.http.queue_size":
    "Uploads accepted but not started; beyond it the server answers 503. Default 16.",
  "server.uploads": "Resumable (tus) uploads: partial uploads a producer may resume.",
  "server.uploads.partial_ttl":
    "How long a partial upload is kept after its last bytes arrived; then its bytes are removed and a resume starts over (a duration, default 24h).",
  "server.uploads.max_partials_per_token":
    "Partial uploads one token may hold at once; a further creation is refused with 429. Default 4.",
  "server.http.workers":
    "Runs executed concurrently (runs of one pipeline never overlap). Default 2.",
  "server.name":
    "The service's name, recorded in its upload store: a store of another service is refused. Default: derived from the configuration file's path.",
  "server.metrics": "GET /metrics (Prometheus text format) of serve.",
  "server.metrics.public":
    "true: /metrics answers without a token (bind the listener to a private network). Default false: any upload token may read it.",
  "server.log": "The JSON lines serve writes on stderr.",
  "server.log.level":
    "debug, info (default), warn or error: lines below this level are not written. Requests and state changes of runs are info, failed runs and warnings warn, 5xx answers error.",
  "server.http.staging_directory":
    "Where uploads are received and extracted; default a directory of this service under $XDG_STATE_HOME/distributor/serve (~/.local/state/distributor/serve).",
  "server.store":
    "Where run records, the queue and idempotency records live; an accepted upload survives a crash or restart.",
  "server.store.backend":
    "embedded (default): durable files below path, no service to run. memory: forgotten when serve exits. postgres: shared by several serve instances (needs server.staging and @distributor/store-postgres).",
  "server.store.path":
    "embedded: the store's directory, private to this user; default beside the default staging directory, in this service's own directory under $XDG_STATE_HOME/distributor/serve.",
  "server.store.max_runs":
    "Finished run records kept at most; beyond it the oldest finished ones are forgotten. Default 10000.",
  "server.store.url_env":
    "postgres: secret reference (environment variable, else a file in secrets.directory) holding the connection URL, postgres://user:password@host:port/database.",
  "server.store.claim_timeout":
    "postgres: how long an instance may miss heartbeats before another instance takes over its runs (a duration, default 60s).",
  "server.staging":
    "Where accepted bundles wait, readable by every serve instance; required with a postgres store. Replaces server.http.staging_directory.",
  ...prefixed(
    "server.staging",
    Object.fromEntries(
      Object.entries(location).filter(
        ([key]) => !/^(host|port|user|private_key|passphrase|password|known_hosts)/.test(key),
      ),
    ),
  ),
  "server.staging.backend":
    "local: a directory on a filesystem every instance mounts at path. s3: a bucket/prefix every instance reaches.",
  "server.staging.path":
    "local: the shared staging directory, private to the serving user (the same uid on every host).",
  secrets: "Where secret references are looked up besides the environment.",
  "secrets.directory":
    "Directory with one file per secret reference (a mounted Docker or Kubernetes secret).",
  upload_tokens: "Bearer tokens accepted by the upload API; required when a source is http_upload.",
  pipelines: "What is published where; pipelines run in the order written.",

  "upload_token.id":
    "Names the token in logs and scopes its idempotency keys; unique among tokens.",
  "upload_token.token_env": "Secret reference holding the token value.",
  "upload_token.allow_pipelines":
    "Pipelines (with an http_upload source) this token may upload to.",

  "pipeline.id": "Unique among pipelines; appears in state files, reports and upload URLs.",
  "pipeline.source": "Where bundles come from.",
  "pipeline.validation":
    "Limits and rules applied to every source bundle before anything is written.",
  "pipeline.validation.unlisted_files":
    "A file present but missing from manifest.json: reject (default) fails validation, ignore leaves it out.",
  "pipeline.validation.max_files": "Most files a bundle may list; default 10000.",
  "pipeline.validation.max_total_size": "Largest total size of the listed files; default 10GB.",
  "pipeline.validation.portable_names":
    "true refuses bundles with names that are one name on case-insensitive or normalising stores (A.html and a.html, NFC and NFD forms); false (default) only warns.",
  "pipeline.destinations": "Where bundles are published; each is planned and written on its own.",

  "source.backend": "local, ssh, s3 or http_upload (bundles pushed to distributor serve).",
  "source.max_upload_size": "http_upload: largest request body accepted; default 64MiB.",
  "source.signatures":
    "Bundles must carry manifest.json.sig, an SSH signature (ssh-keygen -Y sign) of manifest.json by an allowed signer; any backend.",
  "source.signatures.required":
    "true (default) refuses a bundle without manifest.json.sig; false accepts it unsigned. A present signature is always checked.",
  "source.signatures.allowed_signers":
    "Path of an OpenSSH allowed_signers file (principals [options] keytype key) on this machine, read when bundles are checked; required.",
  "source.signatures.namespace":
    "The namespace signatures are made in (ssh-keygen -Y sign -n); default distributor.",
  ...prefixed("source", location),

  "destination.id": "Unique within the pipeline.",
  "destination.backend": "local, ssh or s3.",
  "destination.fsync":
    "local and ssh: flush every written file to disk before it is moved into place (default true); false flushes only the state and lease files, so a power cut may lose outputs the state records.",
  ...prefixed("destination", location),
  "destination.publish":
    "What is written: copies of the bundle files, HTML rendered from Markdown, or both.",
  "destination.publish.source": "Copy every file of the manifest; default true.",
  "destination.publish.html":
    "Write HTML rendered from Markdown; needs transform.markdown_to_html.enabled. Default false.",
  "destination.transform": "Transforms producing generated outputs.",
  "destination.transform.markdown_to_html": "Render .md and .markdown files to HTML.",
  "destination.transform.markdown_to_html.enabled": "Default false.",
  "destination.transform.markdown_to_html.mode":
    "sidecar (default): dir/name.md becomes dir/name.html; index: dir/name.md becomes dir/index.html.",
  "destination.path_mapping": "Where bundles land below the destination root.",
  "destination.path_mapping.mode":
    "preserve_relative (default): each bundle at its source-relative path; fixed: only the newest bundle, at the root.",
  "destination.links": "Public URLs for outputs, recorded in state and reported.",
  "destination.links.base_url": "Absolute http(s) URL the output paths are joined below.",
  "destination.links.primary":
    "Which URL is the bundle's main one: auto (default), html, source or none.",
  "destination.state": "How .distributor.json records ownership.",
  "destination.state.mode":
    "single_owner (default): one pipeline and destination own the path; shared_root: several owners publish disjoint outputs into one root.",
  "destination.reconciliation":
    "What happens to an older publication's outputs when a newer bundle replaces it.",
  "destination.reconciliation.mode":
    "replace (default): outputs the new bundle no longer produces are deleted; merge: they stay published and managed.",
  "destination.retention": "Retention policy used by distributor prune (never automatic).",
  "destination.retention.prune": "Which outputs distributor prune may delete.",
  "destination.retention.prune.enabled":
    "Allow prune to select outputs of this destination; default false.",
  "destination.retention.prune.older_than":
    "Outputs last updated longer ago than this duration may be pruned.",
  "destination.retention.prune.keep_latest": "The newest this-many outputs are always kept.",
  "destination.multipart":
    "s3 only: how objects larger than one part are uploaded. Memory per large object is about (concurrency + 1) × part_size.",
  "destination.multipart.part_size":
    "Bytes per part, 5MiB to 5GiB (default 8MiB); an object of at most one part is a single PUT. S3 allows 10 000 parts, so the largest object is 10 000 × part_size.",
  "destination.multipart.concurrency": "Parts of one object uploaded at once, 1 to 16 (default 4).",
  "destination.transfers":
    "Outputs written at once, 1 to 64; absent, the backend's default: local 16, ssh 8, s3 4. More helps across a long round trip; memory grows with it, never with file sizes.",
  "destination.max_deletes":
    'The most managed outputs one publication may delete: a count (100) or a percentage of the managed outputs ("20%"). A plan that deletes more is refused (too_many_deletes) unless run --allow-deletes N allows N. Default: no limit.',
  "destination.max_state_size":
    "The largest state file (.distributor.json) a run writes here, and the largest it reads back, as a size such as 256MiB (at most about 512MiB). A publication whose state would be larger is refused (state_too_large) before anything is written. Default: the larger of 64MiB and 1KiB × validation.max_files.",
  "destination.max_entries":
    "The most entries any listing of this destination may return: planning a replacement, recovery, audit, prune, adopt and inspect list within it. Default 10000000.",
  "destination.layout":
    "local and ssh only: in_place (default) writes outputs directly below the bundle path; releases builds each publication in releases/<id>/ below it and switches the current symlink to it once every output is written, so readers of current never see a mix. Serve the current link. A bundle path keeps the layout it was first published with.",
  "destination.releases": "With layout: releases, how many committed releases stay for rollback.",
  "destination.releases.keep":
    "Committed releases kept, newest first, 1 to 1000 (default 5); the one current links to always stays. Older ones are removed after each publication.",
  "destination.releases.promote":
    "auto (default): a run makes its release live. manual: every run of this destination stages its release (committed in releases/<id>/, current unchanged, status staged) until distributor promote makes it live; runs serve starts too.",
  "destination.releases.preview_url":
    "An http(s) URL containing {release}: where a staged release can be looked at. Reports give it with {release} replaced by the release id; serve <bundle path>/releases/ there.",
  "destination.releases.keep_staged":
    "Staged releases (committed, newer than the live one) retention keeps, newest first, 0 to 1000; default: every one, since a staged release waits for an operator's decision.",
  "destination.metadata":
    "s3 only: object metadata rules, tried in order; the first whose match fits an output's path below the destination root decides.",
  "destination.metadata.match":
    "Glob over the output's path below the destination root: * and ? within a segment, ** for any number of segments, [abc], {a,b}.",
  "destination.metadata.cache_control": "Cache-Control stored with matching objects.",
  "destination.metadata.content_type":
    "Content-Type stored with matching objects, instead of the one inferred from the extension.",
  "destination.metadata.content_disposition":
    "Content-Disposition stored with matching objects (attachment, inline; filename=...).",
  "destination.metadata.content_encoding":
    "gzip or br: matching outputs are compressed so when published and stored with this Content-Encoding.",
  "destination.transfer": "How the comparison of source and destination state becomes an action.",
  "destination.transfer.on_destination_same":
    "The destination holds this exact bundle: skip (default) or fail.",
  "destination.transfer.on_destination_older":
    "The destination holds an older created of the same bundle id: replace (default), skip or fail.",
  "destination.transfer.on_destination_newer":
    "The destination holds a newer created of the same bundle id: skip (default) or fail.",
  "destination.transfer.on_conflict": "The two cannot be ordered: fail, the only value.",
};

function prefixed(definition: string, entries: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(entries).map(([path, text]) => [`${definition}.${path}`, text]),
  );
}
