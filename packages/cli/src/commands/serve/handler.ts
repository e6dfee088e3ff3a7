import * as publish from "@distributor/publish";
import type { UploadServerEvent } from "@distributor/server";
import { createUploadServer, eventLevel, parseListen } from "@distributor/server";
import { createCliBackends } from "../../backends.js";
import type { CommandHandler } from "../../command.js";
import { UsageError } from "../../errors.js";
import { cliPackage } from "../../version.js";
import type { ServeCommandOptions } from "./options.js";
import { openConfiguredPostgresStore } from "./postgres-store.js";

/** `server.log.level` values, least to most severe. */
const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
const LIFECYCLE: ReadonlySet<string> = new Set(["listening", "recovered", "shutdown"]);

/**
 * `distributor serve`: runs the upload server until the process is interrupted, then shuts it
 * down gracefully (accepted runs finish). Log lines are JSON on stderr, one per event.
 */
export const serveCommand: CommandHandler<ServeCommandOptions> = async (options, context) => {
  const config = await publish.loadConfig(options.configPath);
  // A bad --listen is the command line's mistake; check it before tokens are resolved.
  if (options.listen !== undefined) {
    const port = portOutOfRange(options.listen);
    if (port !== undefined) {
      throw new UsageError(
        `--listen: port ${port} of ${JSON.stringify(options.listen)} is out of range: use 1–65535, or 0 for any free port`,
      );
    }
    try {
      parseListen(options.listen);
    } catch (error) {
      throw new UsageError(`--listen: ${(error as Error).message}`);
    }
  }
  // One JSON line per event at or above server.log.level, with its level; tokens are never in
  // an event (requests carry the token's id).
  const least = LOG_LEVELS.indexOf(config.server.log.level);
  const log = (event: UploadServerEvent) => {
    const level = eventLevel(event);
    // Start, recovery and shutdown are always written: they say where and what the server is.
    if (LOG_LEVELS.indexOf(level) < least && !LIFECYCLE.has(event.type)) return;
    context.io.stderr.write(
      `${JSON.stringify({ time: new Date().toISOString(), level, ...event })}\n`,
    );
  };
  const store =
    config.server.store.backend === "postgres"
      ? await openConfiguredPostgresStore(config, { signal: context.signal })
      : undefined;
  try {
    // Many publications share one event loop here: local destinations must not block it.
    const backends = {
      ...context.backends,
      local: createCliBackends(undefined, { blockingCalls: false }).local!,
    };
    const server = await createUploadServer({
      config,
      backends,
      distributorVersion: (await cliPackage()).version,
      onEvent: log,
      ...(store ? { store } : {}),
    });
    try {
      await server.listen(options.listen ?? config.server.http.listen);
    } catch (error) {
      await server.close();
      throw error;
    }
    await new Promise<void>((resolve) => {
      if (context.signal.aborted) return resolve();
      context.signal.addEventListener("abort", () => resolve(), { once: true });
    });
    await server.close();
  } finally {
    await store?.close();
  }
  return { ok: true, result: null, text: [] };
};

/**
 * The port of a `host:port`, `[ipv6]:port` or `:port` address written as digits but beyond what
 * TCP allows; `parseListen` would call such an address malformed, not its port too large.
 */
function portOutOfRange(address: string): string | undefined {
  const port = /^(?:\[[^\]]+\]|[^:[\]]*):(\d+)$/.exec(address)?.[1];
  return port !== undefined && Number(port) > 65_535 ? port : undefined;
}
