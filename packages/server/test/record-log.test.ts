import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openRecordLog, readRecordLog } from "../src/store/record-log.js";

const FORMAT = "test-log/1";
const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

/** A log over `applied` (what its callers were told is durable), its flushes counted. */
async function testLog(failFlushes: number[] = []) {
  const root = await mkdtemp(join(tmpdir(), "distributor-log-"));
  roots.push(root);
  const file = join(root, "records.log");
  const applied: object[] = [];
  let flushes = 0;
  const log = await openRecordLog({
    file,
    format: FORMAT,
    snapshot: () => applied,
    // A failing wrapper: the flushes numbered in `failFlushes` fail as a full disk would.
    openForAppend: async (path) => {
      const handle = await open(path, "a", 0o600);
      const datasync = handle.datasync.bind(handle);
      handle.datasync = async () => {
        flushes += 1;
        if (failFlushes.includes(flushes))
          throw Object.assign(new Error("no space left"), { code: "ENOSPC" });
        return datasync();
      };
      return handle;
    },
  });
  const append = (entry: object) => log.append(entry, () => applied.push(entry));
  return { file, log, append, applied, flushes: () => flushes };
}

describe("the record log", () => {
  it("writes the changes of one turn with one flush, and those asked for meanwhile with the next", async () => {
    const { file, log, append, flushes } = await testLog();
    const first = Array.from({ length: 50 }, (_, n) => append({ n }));
    await first[0];
    const second = Array.from({ length: 50 }, (_, n) => append({ n: 50 + n }));
    await Promise.all([...first, ...second]);
    expect(flushes()).toBe(2);
    await log.close();
    expect(await readRecordLog(file, FORMAT)).toEqual(
      Array.from({ length: 100 }, (_, n) => ({ n })),
    );
  });

  it("fails the callers of a failed flush, and writes the log afresh without their changes", async () => {
    const { file, log, append, applied } = await testLog([2]);
    await append({ n: 1 });
    const failed = append({ n: 2 });
    await expect(failed).rejects.toMatchObject({
      code: "store_write_failed",
      message: `upload store log ${file} could not be written: no space left`,
    });
    expect(applied).toEqual([{ n: 1 }]);
    // The next change goes to a log written afresh from what was acknowledged.
    await append({ n: 3 });
    await log.close();
    expect(await readRecordLog(file, FORMAT)).toEqual([{ n: 1 }, { n: 3 }]);
    expect((await readFile(file, "utf8")).split("\n")[0]).toBe(`{"format":"${FORMAT}"}`);
  });

  it("refuses a log of another format, naming it", async () => {
    const { file, log, append } = await testLog();
    await append({ n: 1 });
    await log.close();
    await expect(readRecordLog(file, "other/1")).rejects.toThrow(
      `upload store log ${file} is not a other/1 log (its first line has format "${FORMAT}")`,
    );
  });

  it("refuses changes once closed", async () => {
    const { log, append } = await testLog();
    await log.close();
    await expect(append({ n: 1 })).rejects.toMatchObject({ code: "store_closed" });
  });
});
