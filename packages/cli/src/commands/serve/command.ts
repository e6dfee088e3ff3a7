import { optionalString, type RawFlags, rejectPositionals } from "../../flags.js";
import { DEFAULT_CONFIG_PATH, defaultConfigFlag } from "../options.js";
import { defineCommand } from "../spec.js";
import type { ServeCommandOptions } from "./options.js";

export const serve = defineCommand<ServeCommandOptions>({
  command: "serve",
  name: "serve",
  describe: "Run the HTTP upload API: accept bundles for http_upload pipelines and publish them",
  usage: "Usage:\n  distributor serve [--config <path>] [--listen <host:port>]",
  flags: {
    config: defaultConfigFlag,
    listen: {
      type: "string",
      describe:
        "Address to listen on, host:port or [ipv6]:port (default server.http.listen, 127.0.0.1:8080); port 0 picks a free port",
    },
  },
  epilog:
    "Producers POST gzip or plain tar archives to /pipelines/<id>/uploads with a bearer token\n" +
    "from upload_tokens; each accepted bundle is validated, queued and published by the\n" +
    "pipeline's destinations. GET /runs/<run_id> reports a run, GET /healthz the server.\n" +
    "Every upload token must resolve (environment or secrets.directory) or serve does not start.\n" +
    "Logs are JSON lines on stderr, one per request and per run; tokens are never logged.\n" +
    "SIGINT or SIGTERM stops accepting, lets accepted runs finish and exits 0; a second\n" +
    "signal exits at once.",
  parse(flags) {
    rejectPositionals(flags, "serve", 1);
    // Serve writes JSON log lines and has no --format.
    return { format: "text", options: serveOptions(flags) };
  },
  load: async () => (await import("./handler.js")).serveCommand,
});

function serveOptions(flags: RawFlags): ServeCommandOptions {
  const listen = optionalString(flags, "listen");
  return {
    configPath: optionalString(flags, "config") ?? DEFAULT_CONFIG_PATH,
    ...(listen === undefined ? {} : { listen }),
  };
}
