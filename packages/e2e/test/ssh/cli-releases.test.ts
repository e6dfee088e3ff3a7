import { mkdtemp, readlink, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  filesBelow,
  resultOf,
  runCli,
  same,
  site,
  spawnCli,
  startReader,
  useTempDir,
  writeBundle,
} from "@distributor/cli/testing";
import { startSshd, type TestSshd } from "@distributor/storage-ssh/testing";
import { afterAll, describe, expect, it } from "vitest";

// `layout: releases` on an SFTP destination (a real OpenSSH server on loopback, whose files this
// test reads directly): the switch of `current` is a posix-rename@openssh.com of a new link, so
// readers see one whole publication at every moment; unchanged files are hard links
// (hardlink@openssh.com); a run killed with SIGKILL leaves current whole; rollback switches back.

const ci = process.env.CI;
const required = ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
let sshd: TestSshd | undefined;
try {
  sshd = await startSshd();
} catch (error) {
  if (required) throw error;
  console.warn(`CLI SSH release tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await sshd?.stop();
});

const tmp = useTempDir();

function server(): TestSshd {
  if (sshd === undefined) throw new Error("sshd is not running");
  return sshd;
}

async function sshConfig(source: string, root: string): Promise<string> {
  const s = server();
  const knownHosts = join(tmp(), "known_hosts");
  await writeFile(knownHosts, s.knownHostsLine);
  const path = join(tmp(), "distributor.yml");
  await writeFile(
    path,
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: ssh\n        host: ${s.host}\n        port: ${s.port}\n        user: ${s.user}\n        path: ${root}\n        private_key_file: ${s.clientKeyFile}\n        known_hosts_file: ${knownHosts}\n        host_key_policy: strict\n        path_mapping: {mode: fixed}\n        layout: releases\n`,
  );
  return path;
}

describe.skipIf(sshd === undefined)("layout: releases on an SSH destination", () => {
  it("switches readers whole, hard-links unchanged files, survives SIGKILL and rolls back", async () => {
    const source = join(tmp(), "src");
    const root = await mkdtemp(join(server().sftpRoot, "releases-"));
    const config = await sshConfig(source, root);
    const A = site("A", 300);
    const B = site("B", 300);
    const C = site("C", 300);
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", A);
    const first = await runCli(["run", "--config", config]);
    expect(first.code, first.stderr).toBe(0);
    const linkA = await readlink(join(root, "current"));

    const reader = await startReader(root, join(tmp(), "expected.json"), { A, B });
    await writeBundle(source, "site", "2026-06-02T00:00:00Z", B);
    const second = await runCli(["run", "--config", config, "--format", "json"]);
    const seen = await reader.stop();
    expect(second.code, second.stderr).toBe(0);
    const [action] = resultOf(second).actions as Array<{ action: string; outputs: unknown[] }>;
    expect(action?.action).toBe("replace_older");
    expect(action?.outputs).toHaveLength(152);
    expect(seen.violations).toEqual([]);
    expect(seen.seen).toContain("B");
    const linkB = await readlink(join(root, "current"));
    expect(same(await filesBelow(join(root, linkB)), B)).toBe(true);
    const inode = async (link: string, path: string) => (await stat(join(root, link, path))).ino;
    expect(await inode(linkB, "pages/00001.html")).toBe(await inode(linkA, "pages/00001.html"));
    expect(await inode(linkB, "pages/00000.html")).not.toBe(await inode(linkA, "pages/00000.html"));

    // Killed part-way: current stays on a whole release, and the next run finishes.
    await writeBundle(source, "site", "2026-06-03T00:00:00Z", C);
    const victim = spawnCli(["run", "--config", config]);
    await new Promise((resolve) => setTimeout(resolve, 700));
    victim.kill("SIGKILL");
    await victim.done;
    const live = await filesBelow(join(root, await readlink(join(root, "current"))));
    expect([A, B, C].filter((set) => same(live, set))).toHaveLength(1);
    const next = await runCli(["run", "--config", config]);
    expect(next.code, next.stderr).toBe(0);
    expect(same(await filesBelow(join(root, await readlink(join(root, "current")))), C)).toBe(true);
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);

    const back = await runCli([
      "rollback",
      "--config",
      config,
      "--pipeline",
      "site",
      "--destination",
      "www",
      "--previous",
      "--format",
      "json",
    ]);
    expect(back.code, back.stderr).toBe(0);
    expect(resultOf(back)).toMatchObject({ to: linkB.slice("releases/".length), switched: true });
    expect(await readlink(join(root, "current"))).toBe(linkB);
    const again = await runCli(["audit", "--config", config]);
    expect(again.code, again.stdout).toBe(0);
  }, 180_000);
});
