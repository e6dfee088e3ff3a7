import { randomUUID } from "node:crypto";
import { describeUploadStoreContract } from "@distributor/upload-store/testing";
import pg from "pg";
import { describe, inject } from "vitest";
import { openPostgresUploadStore } from "../src/index.js";

const url = inject("postgresUrl");

/** Every fixture is a fresh schema of the shared server, dropped afterwards. */
async function dropSchema(schema: string) {
  const client = new pg.Client({ connectionString: url ?? "" });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

describe.skipIf(url === null)("postgres", () => {
  describeUploadStoreContract("postgres", async (limits) => {
    const schema = `contract_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const instanceId = `contract-${schema}`;
    const open = () =>
      openPostgresUploadStore({ ...limits, url: url ?? "", schema, instanceId, poolSize: 2 });
    return {
      store: await open(),
      // The same instance name, as a process restarted in place: it queues its runs again.
      reopen: open,
      cleanup: () => dropSchema(schema),
    };
  });
});
