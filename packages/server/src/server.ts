import { randomUUID } from "node:crypto";
import { stat } from "node:fs/promises";
import type { Server } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import type { Config } from "@distributor/publish";
import {
  errorMessage,
  signaturePolicy,
  WorkflowError,
  type WorkflowOptions,
} from "@distributor/publish";
import type { UploadStore } from "@distributor/upload-store";
import { resolveUploadTokens } from "./auth.js";
import type { ServerContext } from "./context.js";
import type { UploadServerEvent } from "./events.js";
import { countingStoreErrors, createServerMetrics } from "./metrics.js";
import { recover, startSweeper } from "./recovery.js";
import { partialsHeld } from "./resumable/expiry.js";
import { openPartialStore } from "./resumable/open.js";
import { handle } from "./router.js";
import { executeRun, startPoller } from "./runner.js";
import type { UploadServerOptions } from "./server-options.js";
import { openStagingArea } from "./staging/staging-area.js";
import { openEmbeddedUploadStore, preparePrivateDirectory } from "./store/embedded-store.js";
import { createMemoryUploadStore } from "./store/memory-store.js";
import { createWorkers } from "./workers.js";

export { eventLevel, type LogLevel, type UploadServerEvent } from "./events.js";
export { MAX_STATUS_WAIT_MS } from "./routes/status.js";
export type { UploadServerOptions } from "./server-options.js";

export interface UploadServerAddress {
  host: string;
  port: number;
  /** `http://host:port`, for clients and the startup log line. */
  url: string;
}

export interface UploadServer {
  /** Starts listening on `host:port` (default `server.http.listen`); port 0 picks a free port. */
  listen(address?: string): Promise<UploadServerAddress>;
  /** The bound address once listening. */
  readonly address: UploadServerAddress | undefined;
  /**
   * Graceful shutdown: stops accepting connections and uploads, lets uploads being received
   * and every accepted run finish, then closes. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Creates the HTTP upload server of docs/integrations/http-upload.md. Upload tokens are resolved and allowed_signers
 * files read here, so a missing, empty or duplicated token or an unusable allowed_signers file
 * fails before anything listens.
 */
export async function createUploadServer(options: UploadServerOptions): Promise<UploadServer> {
  const { config } = options;
  const http = config.server.http;
  const uploadPipelines = config.pipelines.filter((p) => p.source.backend === "http_upload");
  if (uploadPipelines.length === 0) {
    throw new WorkflowError(
      "nothing_to_serve",
      `${config.sourceName}: no pipeline has an http_upload source, so there is nothing to serve`,
    );
  }
  const tokens = await resolveUploadTokens(config, {
    ...(options.env ? { env: options.env } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    onWarning: (message) => options.onEvent?.({ type: "warning", message }),
  });
  // An allowed_signers file that cannot be used fails before anything listens, not as a 500 on
  // the first upload; each upload reads it again, so rotated keys need no restart.
  for (const pipeline of uploadPipelines) {
    await signaturePolicy(pipeline, options.signal ? { signal: options.signal } : {});
  }
  // Shared staging (several instances) or this instance's own directory.
  const stagingArea = await openStagingArea(config, options.backends);
  try {
    await prepareStagingRoot(
      stagingArea.receiveRoot,
      config.server.staging?.backend === "local"
        ? "server.staging.path"
        : "server.http.staging_directory",
    );
  } catch (error) {
    await stagingArea.close().catch(() => undefined);
    throw error;
  }

  const partials = openPartialStore(stagingArea, config.server.uploads.partialTtlMs);
  const now = () => options.now?.() ?? new Date();
  const emit = (event: UploadServerEvent) => options.onEvent?.(event);
  const rawStore = options.store ?? (await openConfiguredStore(config));
  const ownStore = options.store === undefined;
  const metrics = createServerMetrics({
    pipelines: config.pipelines.filter((p) => p.source.backend === "http_upload").map((p) => p.id),
    // Read from the store itself: a failed read is counted once, by the gauge.
    queueDepth: () => rawStore.queueLength(),
    stagingBytes: () => rawStore.stagedBytes(),
    partials: () => partialsHeld(partials),
  });
  const store = countingStoreErrors(rawStore, metrics);
  const ctx: ServerContext = {
    options,
    config,
    uploadPipelines,
    tokens,
    stagingArea,
    store,
    workers: createWorkers({
      store,
      workers: http.workers,
      execute: (job) => executeRun(ctx, job),
      onError: (error) =>
        emit({ type: "warning", message: `upload queue: ${errorMessage(error)}` }),
    }),
    runControls: new Map(),
    resumable: { partials, instanceId: randomUUID(), holders: new Map() },
    cancelRequests: new Set(),
    stopping: new AbortController(),
    closing: undefined,
    metrics,
    now,
    emit,
  };
  const { workers } = ctx;
  const inFlight = new Set<Promise<void>>();
  let bound: UploadServerAddress | undefined;

  if (ownStore) await warnOfEarlierStore(config, emit);
  try {
    await recover(ctx);
  } catch (error) {
    if (ownStore) await store.close().catch(() => undefined);
    await stagingArea.close().catch(() => undefined);
    throw error;
  }

  const server: Server = createServer((request, response) => {
    const handling = handle(ctx, request, response);
    inFlight.add(handling);
    void handling.finally(() => inFlight.delete(handling));
  });
  const poller = startPoller(ctx);
  const sweeper = startSweeper(ctx);

  const self: UploadServer = {
    get address() {
      return bound;
    },
    async listen(address = http.listen) {
      const { host, port } = parseListen(address);
      await new Promise<void>((resolve, reject) => {
        const onError = (error: NodeJS.ErrnoException) => {
          server.off("listening", onListening);
          reject(listenError(address, error));
        };
        const onListening = () => {
          server.off("error", onError);
          resolve();
        };
        server.once("error", onError);
        server.once("listening", onListening);
        server.listen(port, host);
      });
      const info = server.address() as AddressInfo;
      const shown = info.family === "IPv6" ? `[${info.address}]` : info.address;
      bound = { host: info.address, port: info.port, url: `http://${shown}:${info.port}` };
      emit({ type: "listening", address: `${shown}:${info.port}`, url: bound.url });
      return bound;
    },
    close() {
      ctx.closing ??= (async () => {
        emit({ type: "shutdown", phase: "started", running: workers.running() });
        ctx.stopping.abort();
        const stopped = new Promise<void>((resolve) => {
          if (!server.listening) return resolve();
          server.close(() => resolve());
        });
        server.closeIdleConnections();
        await Promise.allSettled([...inFlight]);
        await workers.drained();
        clearInterval(sweeper);
        if (poller !== undefined) clearInterval(poller);
        await stagingArea.close().catch(() => undefined);
        server.closeAllConnections();
        await stopped;
        if (ownStore) await store.close();
        emit({ type: "shutdown", phase: "finished", running: workers.running() });
      })();
      return ctx.closing;
    },
  };
  options.signal?.addEventListener("abort", () => void self.close(), { once: true });
  return self;
}

/**
 * Before the default store followed the configuration file, a named service's was shared by
 * every file naming it: while one is left there, the uploads still queued in it run only where a
 * `serve` opens it, so the operator is told where it is and how to drain it.
 */
async function warnOfEarlierStore(
  config: Config,
  emit: (event: UploadServerEvent) => void,
): Promise<void> {
  const earlier = config.server.earlierDirectory;
  if (earlier === undefined || config.server.store.backend !== "embedded") return;
  const store = join(earlier, "store");
  if (
    !(await stat(store).then(
      (found) => found.isDirectory(),
      () => false,
    ))
  )
    return;
  emit({
    type: "warning",
    message: `server.name ${JSON.stringify(config.server.service)}: the default staging area and store are now this configuration file's own, in ${dirname(config.server.store.path)}; ${earlier} holds the store that earlier versions shared between every configuration naming this service, and uploads still queued there run only where a serve opens it: to drain it, serve once with server.store.path: ${store} and server.http.staging_directory: ${join(earlier, "staging")}, then remove ${earlier}`,
  });
}

/** The store `server.store` configures. */
async function openConfiguredStore(config: Config): Promise<UploadStore> {
  const limits = {
    queueSize: config.server.http.queueSize,
    retentionMs: config.server.http.retentionMs,
    maxRuns: config.server.store.maxRuns,
  };
  if (config.server.store.backend === "memory") return createMemoryUploadStore(limits);
  if (config.server.store.backend === "postgres") {
    throw new WorkflowError(
      "store_not_given",
      "server.store.backend postgres: open the store with openPostgresUploadStore from @distributor/store-postgres and pass it as `store`",
    );
  }
  return openEmbeddedUploadStore({
    ...limits,
    path: config.server.store.path,
    service: config.server.service,
    configFile: config.server.configFile,
  });
}

/** `host:port`, `[v6]:port` or `:port` (every interface). */
export function parseListen(address: string): { host: string | undefined; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  const port = Number(match?.[3]);
  if (match === null || !Number.isInteger(port) || port > 65535) {
    throw new WorkflowError(
      "invalid_listen_address",
      `listen address ${JSON.stringify(address)} must be host:port, [ipv6]:port or :port`,
    );
  }
  // An empty host (`:8080`) listens on every interface.
  const host = match[1] ?? match[2];
  return { host: host === "" ? undefined : host, port };
}

function listenError(address: string, error: NodeJS.ErrnoException): WorkflowError {
  const reason =
    error.code === "EADDRINUSE"
      ? "address already in use"
      : error.code === "EADDRNOTAVAIL"
        ? "address not available on this machine"
        : error.code === "EACCES"
          ? "permission denied"
          : error.message;
  return new WorkflowError("listen_failed", `cannot listen on ${address}: ${reason}`, {
    cause: error,
  });
}

/**
 * Creates the staging root, or accepts an existing one only when it is a real directory owned by
 * this user that no one else may write: the default lives in the shared temp directory, where
 * another local user could create it first and then swap a staged bundle between its validation
 * and its run, or point extraction elsewhere with a symlink.
 */
async function prepareStagingRoot(directory: string, key: string): Promise<void> {
  await preparePrivateDirectory(directory, { code: "staging_unsafe", key });
}
