import type { StoreLimits } from "@distributor/upload-store";

export interface PostgresUploadStoreOptions extends StoreLimits {
  /** Connection URL, `postgres://user:password@host:port/database`. */
  url: string;
  /** Schema holding the store's tables, created when missing (default `distributor`). */
  schema?: string;
  /**
   * `server.store.claim_timeout`: an instance whose heartbeat is this old is taken for dead, and
   * another instance takes its runs over (default 60 s). Heartbeats come four times as often.
   */
  claimTimeoutMs?: number;
  /**
   * This instance's name in the store (default: host, process id and a random suffix). A process
   * restarted with the same name queues its own previous runs again at once instead of waiting
   * for the claim timeout; two live processes must never share one.
   */
  instanceId?: string;
  /**
   * How often this instance renews its heartbeat (default a quarter of the claim timeout). Tests
   * set it beyond their length to stand for a process that stalled.
   */
  heartbeatIntervalMs?: number;
  /** How long to wait for a connection (default 10 s) and for a query's answer (default 30 s). */
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
  /**
   * The service the store belongs to (`server.name`, or one derived from the configuration
   * file): recorded by the first instance, and a store recorded for another service is refused.
   */
  service?: string;
  /** Connections in the pool (default 4). */
  poolSize?: number;
}
