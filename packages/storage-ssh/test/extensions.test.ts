import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { StorageBackend } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSshBackend } from "../src/index.js";
import { startSshd, type TestSshd } from "../src/testing/index.js";
import { sshd } from "./fixture.js";

/** A server of our own that does not advertise `hidden`, and a backend on a fresh root there. */
function serverWithout(hidden: string[]) {
  let own: TestSshd;
  let dir: string;
  let roots = 0;
  beforeAll(async () => {
    own = await startSshd({ hideSftpExtensions: hidden });
    dir = await mkdtemp(join(tmpdir(), "distributor-ssh-ext-"));
    await writeFile(join(dir, "known_hosts"), own.knownHostsLine);
  });
  afterAll(async () => {
    await own?.stop();
    await rm(dir, { recursive: true, force: true });
  });
  return async (): Promise<{ backend: StorageBackend; root: string }> => {
    const root = join(own.sftpRoot, `r${roots++}`);
    const backend = await createSshBackend({
      host: own.host,
      port: own.port,
      user: own.user,
      root,
      authentication: { method: "private_key", privateKey: await readFile(own.clientKeyFile) },
      knownHostsFile: join(dir, "known_hosts"),
      // Each channel starts a filter process; two keep the tests quick and still concurrent.
      channels: 2,
    });
    return { backend, root };
  };
}

describe.skipIf(sshd === null)("a server without posix-rename@openssh.com", () => {
  const open = serverWithout(["posix-rename@openssh.com"]);

  it("refuses every overwrite with unsupported before writing anything; creates still work", async () => {
    const { backend, root } = await open();
    try {
      const { version } = await backend.writeFile("site/a.txt", "created");
      const expected =
        "the SFTP server does not offer posix-rename@openssh.com, which atomic replacement needs";
      for (const [path, options] of [
        ["site/a.txt", { overwrite: true }],
        ["site/a.txt", { ifMatch: version }],
        ["site/new/deeper/b.txt", { overwrite: true }],
      ] as const) {
        const error = await expectStorageError(
          backend.writeFile(path, "replacement", options),
          "unsupported",
        );
        expect(error.message).toBe(`write file ssh:${path}: ${expected}`);
      }
      // Nothing was written: no temp file, no directory, the old bytes.
      expect(await readdir(root, { recursive: true })).toEqual(["site", "site/a.txt"]);
      expect(await readFile(join(root, "site", "a.txt"), "utf8")).toBe("created");
    } finally {
      await backend.close();
    }
  });
});

describe.skipIf(sshd === null)("a server without hardlink@openssh.com", () => {
  const open = serverWithout(["hardlink@openssh.com"]);

  it("creates without clobbering through the plain rename, and replaces as usual", async () => {
    const { backend, root } = await open();
    try {
      await backend.writeFile("dir/x.txt", "x");
      await expectStorageError(backend.writeFile("dir/x.txt", "again"), "already_exists");
      await backend.writeFile("dir/x.txt", "replaced", { overwrite: true });
      expect(await readFile(join(root, "dir", "x.txt"), "utf8")).toBe("replaced");
      expect(await readdir(join(root, "dir"))).toEqual(["x.txt"]);
    } finally {
      await backend.close();
    }
  });

  it("removes its temp file when a racing creator wins", async () => {
    const { backend, root } = await open();
    try {
      await backend.writeFile("dir/x.txt", "x");
      let pulls = 0;
      const source = new Readable({
        read() {
          pulls++;
          if (pulls === 1) this.push(Buffer.from("ours"));
          else {
            // Someone else creates the target while our bytes are still streaming.
            writeFile(join(root, "dir", "y.txt"), "theirs").then(() => this.push(null));
          }
        },
      });
      await expectStorageError(backend.writeFile("dir/y.txt", source), "already_exists");
      expect((await readdir(join(root, "dir"))).sort()).toEqual(["x.txt", "y.txt"]);
      expect(await readFile(join(root, "dir", "y.txt"), "utf8")).toBe("theirs");
    } finally {
      await backend.close();
    }
  });

  it("lets exactly one of many racing creators win, leaving no temp file", async () => {
    const { backend, root } = await open();
    try {
      const attempts = await Promise.allSettled(
        Array.from({ length: 8 }, (_, index) => backend.writeFile("race/out.txt", `by ${index}`)),
      );
      const winners = attempts.flatMap((attempt, index) =>
        attempt.status === "fulfilled" ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      for (const attempt of attempts) {
        if (attempt.status === "rejected") {
          expect(attempt.reason).toMatchObject({ kind: "already_exists" });
        }
      }
      expect(await readdir(join(root, "race"))).toEqual(["out.txt"]);
      expect(await readFile(join(root, "race", "out.txt"), "utf8")).toBe(`by ${winners[0]}`);
    } finally {
      await backend.close();
    }
  });
});
