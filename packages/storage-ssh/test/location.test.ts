import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSshLocation, type SshLocationConfig } from "../src/index.js";
import { freshRoot, server, sshd } from "./fixture.js";

describe.skipIf(sshd === null)("openSshLocation", () => {
  const roots: string[] = [];
  afterEach(async () => {
    for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
  });

  const location = async (extra: Partial<SshLocationConfig>): Promise<SshLocationConfig> => {
    const shared = server();
    const root = await freshRoot();
    roots.push(root);
    return {
      host: shared.host,
      port: shared.port,
      user: shared.user,
      path: root,
      knownHostsFile: shared.knownHostsFile,
      ...extra,
    };
  };

  it("authenticates with a key from a secret reference in the environment", async () => {
    const key = await readFile(server().clientKeyFile, "utf8");
    const where = await location({ privateKeyEnv: "GUIDE_SSH_KEY" });
    const backend = await openSshLocation(where, { env: { GUIDE_SSH_KEY: key } });
    try {
      await backend.writeFile("a/b.txt", Buffer.from("hello"), { overwrite: false });
    } finally {
      await backend.close();
    }
    expect(await readFile(join(where.path, "a", "b.txt"), "utf8")).toBe("hello");
  });

  it("resolves a reference from secrets.directory when the environment lacks it", async () => {
    const shared = server();
    const secrets = await freshRoot();
    roots.push(secrets);
    await writeFile(join(secrets, "GUIDE_SSH_KEY"), await readFile(shared.clientKeyFile));
    const where = await location({ privateKeyEnv: "GUIDE_SSH_KEY" });
    const backend = await openSshLocation(where, { env: {}, secrets: { directory: secrets } });
    try {
      expect(await backend.hasAny("")).toBe(false);
    } finally {
      await backend.close();
    }
  });

  it("names the reference when it resolves to nothing, before connecting", async () => {
    const where = await location({ passwordEnv: "GUIDE_SSH_PASSWORD" });
    await expect(openSshLocation(where, { env: {} })).rejects.toThrow(
      "secret GUIDE_SSH_PASSWORD is not available: environment variable GUIDE_SSH_PASSWORD is not set and no secrets.directory is configured",
    );
  });
});
