import type { Config } from "@distributor/publish";
import type { UploadStore } from "@distributor/server";
import { resolveSecret } from "@distributor/storage";

/**
 * Opens the store `server.store` describes when its backend is `postgres`: the connection URL
 * comes from the `url_env` reference (environment variable, else a file in `secrets.directory`).
 */
export async function openConfiguredPostgresStore(
  config: Config,
  options: { env?: NodeJS.ProcessEnv; signal?: AbortSignal; instanceId?: string } = {},
): Promise<UploadStore> {
  const store = config.server.store;
  if (store.backend !== "postgres" || store.urlEnv === undefined) {
    throw new Error(`${config.sourceName}: server.store.backend is ${store.backend}, not postgres`);
  }
  const url = await resolveSecret(store.urlEnv, {
    ...(options.env ? { env: options.env } : {}),
    ...(config.secrets.directory ? { secretsDirectory: config.secrets.directory } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  // The PostgreSQL store (and `pg`) loads only when the configuration asks for it.
  const { openPostgresUploadStore } = await import("@distributor/store-postgres");
  return openPostgresUploadStore({
    url,
    queueSize: config.server.http.queueSize,
    retentionMs: config.server.http.retentionMs,
    maxRuns: store.maxRuns,
    claimTimeoutMs: store.claimTimeoutMs,
    // Instances sharing one database usually run from configuration files at other paths: the
    // store records a service only when the operator names it (server.name).
    ...(config.server.service.startsWith("config:") ? {} : { service: config.server.service }),
    ...(options.instanceId ? { instanceId: options.instanceId } : {}),
  });
}
