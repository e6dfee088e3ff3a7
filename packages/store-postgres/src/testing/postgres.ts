import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** A throwaway PostgreSQL server on loopback, for tests. */
export interface TestPostgres {
  /** `postgres://NAME@127.0.0.1:PORT/postgres`: the cluster's superuser, no password. */
  url: string;
  port: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server at once, keeping its data (a database that went away). */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port, with its data. */
  resume(): Promise<void>;
  /** Stops the server and removes its data. */
  stop(): Promise<void>;
}

const BIN_DIRECTORIES = [
  "/usr/lib/postgresql/17/bin",
  "/usr/lib/postgresql/16/bin",
  "/usr/lib/postgresql/15/bin",
];

/**
 * Starts a PostgreSQL cluster in a fresh temporary directory with `initdb` and `pg_ctl`, listening
 * on 127.0.0.1 and a free port, trusting local connections. PostgreSQL refuses to run as root, so
 * as root the cluster belongs to the `postgres` account and is started through `su`.
 */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = await findBinDirectory();
  const directory = await mkdtemp(join(tmpdir(), "distributor-pg-"));
  const data = join(directory, "data");
  const port = await freePort();
  const user = "distributor";
  const asRoot = process.getuid?.() === 0;
  // The data directory's parent must be reachable by the server's account.
  await chmod(directory, 0o777);
  const options = `-p ${port} -k ${directory} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = `${bin}/pg_ctl -D ${data} -o '${options}' -l ${directory}/log -w -t 60 start`;
  const shell = async (command: string) => {
    if (asRoot) {
      await run("su", ["postgres", "-s", "/bin/sh", "-c", command], { cwd: "/" });
    } else {
      await run("/bin/sh", ["-c", command], { cwd: directory });
    }
  };
  try {
    await shell(
      `${bin}/initdb -D ${data} -A trust -U ${user} --no-sync -E UTF8 >${directory}/initdb.log 2>&1`,
    );
    await shell(start);
  } catch (error) {
    await rm(directory, { recursive: true, force: true }).catch(() => undefined);
    throw new Error(`PostgreSQL did not start in ${directory}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const url = `postgres://${user}@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    async createDatabase(name) {
      await execute(url, `CREATE DATABASE "${name.replace(/"/g, '""')}"`);
      return `postgres://${user}@127.0.0.1:${port}/${name}`;
    },
    async halt() {
      await shell(`${bin}/pg_ctl -D ${data} -m immediate -w stop`);
    },
    async resume() {
      await shell(start);
    },
    async stop() {
      await shell(`${bin}/pg_ctl -D ${data} -m immediate -w stop`).catch(() => undefined);
      await rm(directory, { recursive: true, force: true }).catch(() => undefined);
    },
  };
}

/** The live runs of a store and the instance holding each (null: queued, held by none). */
export async function liveClaims(
  url: string,
  schema = "distributor",
): Promise<{ runId: string; claimedBy: string | null }[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ run_id: string; claimed_by: string | null }>(
      `SELECT run_id, claimed_by FROM "${schema}".upload_runs WHERE job IS NOT NULL ORDER BY seq`,
    );
    return result.rows.map((row) => ({ runId: row.run_id, claimedBy: row.claimed_by }));
  } catch (error) {
    // Before the first instance created the schema there is nothing live.
    if ((error as { code?: string }).code === "42P01") return [];
    throw error;
  } finally {
    await client.end();
  }
}

async function execute(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function findBinDirectory(): Promise<string> {
  for (const directory of BIN_DIRECTORIES) {
    try {
      await run(join(directory, "pg_ctl"), ["--version"]);
      return directory;
    } catch {
      // Not this version.
    }
  }
  throw new Error(
    `no PostgreSQL server found (looked for pg_ctl in ${BIN_DIRECTORIES.join(", ")}); install the postgresql package`,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}
