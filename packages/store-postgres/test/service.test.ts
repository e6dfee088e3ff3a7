import { randomUUID } from "node:crypto";
import type { UploadStore } from "@distributor/upload-store";
import { sampleRun } from "@distributor/upload-store/testing";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { openPostgresUploadStore } from "../src/index.js";

// A schema belongs to one service (`server.name`, or the configuration file): the first store
// that names one records it in upload_store_meta.service, and a store of another service is
// refused (`store_in_use`, naming both) without altering what is recorded.

const url = inject("postgresUrl");
const LIMITS = { queueSize: 50, retentionMs: 60_000, maxRuns: 100 };

let opened: UploadStore[] = [];
let schemas: string[] = [];

async function sql(text: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: url ?? "" });
  await client.connect();
  try {
    return await client.query(text, params);
  } finally {
    await client.end();
  }
}

function newSchema(): string {
  const schema = `service_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  schemas.push(schema);
  return schema;
}

let instances = 0;

async function open(schema: string, service?: string): Promise<UploadStore> {
  instances += 1;
  const store = await openPostgresUploadStore({
    ...LIMITS,
    url: url ?? "",
    schema,
    instanceId: `service-test-${instances}`,
    poolSize: 2,
    ...(service === undefined ? {} : { service }),
  });
  opened.push(store);
  return store;
}

async function close(store: UploadStore): Promise<void> {
  opened = opened.filter((s) => s !== store);
  await store.close();
}

/** What the schema records as its service. */
async function recorded(schema: string): Promise<unknown[]> {
  return (await sql(`SELECT service FROM "${schema}".upload_store_meta`)).rows.map(
    (row) => row.service,
  );
}

/** Accepts a run and reads it back: the store works. */
async function acceptOne(store: UploadStore) {
  const sample = sampleRun();
  expect(await store.reserveQueueSlot()).toBe(true);
  await store.enqueue(sample.run, sample.job, sample.accepted, undefined);
  expect(await store.getRun(sample.runId)).toEqual(sample.run);
  return sample;
}

afterEach(async () => {
  for (const store of opened) await store.close().catch(() => undefined);
  for (const schema of schemas) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  opened = [];
  schemas = [];
});

describe.skipIf(url === null)("postgres store's service", () => {
  it("refuses another service's schema with store_in_use naming both, and opens for its own again", async () => {
    const schema = newSchema();
    const a = await open(schema, "a");
    const sample = await acceptOne(a);
    await close(a);
    expect(await recorded(schema)).toEqual(["a"]);

    const refusal = await open(schema, "b").then(
      () => undefined,
      (error: unknown) => error as { code?: string; message: string },
    );
    expect(refusal).toBeDefined();
    expect(refusal?.code).toBe("store_in_use");
    expect(refusal?.message).toContain(
      `upload store (postgres): schema ${schema} belongs to service "a", not "b"`,
    );
    // Refused, never altered.
    expect(await recorded(schema)).toEqual(["a"]);

    const again = await open(schema, "a");
    expect(await again.getRun(sample.runId)).toEqual(sample.run);
    await acceptOne(again);
  });

  it("refuses another service while its own is open, and lets a second instance of it in", async () => {
    const schema = newSchema();
    const first = await open(schema, "a");
    await expect(open(schema, "b")).rejects.toMatchObject({ code: "store_in_use" });
    const second = await open(schema, "a");
    const sample = await acceptOne(first);
    expect(await second.getRun(sample.runId)).toEqual(sample.run);
  });

  it("works without a service: on a recorded schema without checking it, on a new one recording none", async () => {
    const owned = newSchema();
    const a = await open(owned, "a");
    const sample = await acceptOne(a);
    const anonymous = await open(owned);
    expect(await anonymous.getRun(sample.runId)).toEqual(sample.run);
    await acceptOne(anonymous);
    expect(await recorded(owned)).toEqual(["a"]);

    const fresh = newSchema();
    const plain = await open(fresh);
    await acceptOne(plain);
    await close(plain);
    expect(await recorded(fresh)).toEqual([null]);
    // The first store that names a service records it.
    const b = await open(fresh, "b");
    await acceptOne(b);
    expect(await recorded(fresh)).toEqual(["b"]);
    await expect(open(fresh, "a")).rejects.toMatchObject({ code: "store_in_use" });
  });
});
