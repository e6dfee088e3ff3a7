#!/usr/bin/env node
// Benchmark: SFTP upload throughput of ssh2 with and without its optional native crypto binding,
// for AES-GCM and ChaCha20-Poly1305, against a throwaway sshd on loopback (needs sshd, and
// `pnpm build` first for the test helpers).
//
//   node bench/ssh-crypto.mjs [--mib 256] [--runs 5]
//
// The binding is compiled into a temporary copy of the installed ssh2 with node-gyp against the
// installed Node headers (`npm_config_nodedir`, default /usr); when that fails the script says so
// and measures the JavaScript path only. Each round runs every cipher × build once, alternating;
// the median MiB/s per pair is reported. Each measurement is a separate Node process, so the
// module each one loads is the one it reports.
import { spawnSync } from "node:child_process";
import { cp, mkdtemp, readdir, realpath, rm, symlink } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { median, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const { startSshd } = await import(join(repo, "packages/storage-ssh/dist/testing/index.js"));
const { values } = parseArgs({
  options: { mib: { type: "string", default: "256" }, runs: { type: "string", default: "5" } },
});
const mib = Number(values.mib);
const runs = Number(values.runs);

// ssh2 comes with ssh2-sftp-client, which the SSH adapter depends on.
const sftpClient = createRequire(join(repo, "packages/storage-ssh/package.json")).resolve(
  "ssh2-sftp-client/package.json",
);
const ssh2Dir = dirname(createRequire(sftpClient).resolve("ssh2/package.json"));

const work = await mkdtemp(join(tmpdir(), "distributor-bench-crypto-"));

/** Copies ssh2, links its dependencies (nan among them) beside it, and compiles the binding. */
async function buildNative() {
  const modules = join(work, "native", "node_modules");
  const copy = join(modules, "ssh2");
  await cp(ssh2Dir, copy, { recursive: true, dereference: true });
  // pnpm puts a package's dependencies beside it, as links to their own folders: link them
  // beside the copy the same way, so their own dependencies still resolve.
  for (const entry of await readdir(dirname(ssh2Dir))) {
    if (entry !== "ssh2")
      await symlink(await realpath(join(dirname(ssh2Dir), entry)), join(modules, entry));
  }
  const gyp = join(
    dirname(process.execPath),
    "../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js",
  );
  const result = spawnSync(
    process.execPath,
    [
      gyp,
      `--target=${process.version}`,
      `--real_openssl_major=${/^\d+/.exec(process.versions.openssl)[0]}`,
      "rebuild",
    ],
    {
      cwd: join(copy, "lib/protocol/crypto"),
      encoding: "utf8",
      env: { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir ?? "/usr" },
    },
  );
  if (result.status !== 0) {
    console.log(
      `native binding did not build (node-gyp exit ${result.status}); measuring JavaScript only`,
    );
    return undefined;
  }
  return copy;
}

// The measured child: connects with the given ssh2 and cipher, uploads the local file with
// fastPut (64 requests of 32 KiB in flight, ssh2's defaults, as the adapter's large writes are),
// and prints the seconds and whether the binding loaded.
const child = `
const [ssh2Path, cipher, host, port, user, keyFile, local, remote] = process.argv.slice(1);
const { Client } = require(ssh2Path);
const binding = require(ssh2Path + "/lib/protocol/crypto.js").bindingAvailable;
const conn = new Client();
conn.on("ready", () => conn.sftp((err, sftp) => {
  if (err) throw err;
  const start = process.hrtime.bigint();
  sftp.fastPut(local, remote, (error) => {
    if (error) throw error;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    console.log(JSON.stringify({ seconds, binding }));
    conn.end();
  });
}));
conn.connect({ host, port: Number(port), username: user, privateKey: require("node:fs").readFileSync(keyFile), algorithms: { cipher: [cipher] } });
`;

const sshd = await startSshd();
try {
  const native = await buildNative();
  const local = join(work, "payload.bin");
  await writeSized(local, mib * 1024 * 1024);
  const builds = [["js", ssh2Dir], ...(native ? [["native", native]] : [])];
  const ciphers = ["aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com"];
  const results = new Map();
  for (let round = 0; round < runs; round++) {
    for (const cipher of ciphers) {
      for (const [label, path] of builds) {
        const remote = join(sshd.sftpRoot, "crypto.bin");
        const run = spawnSync(
          process.execPath,
          [
            "-e",
            child,
            path,
            cipher,
            sshd.host,
            String(sshd.port),
            sshd.user,
            sshd.clientKeyFile,
            local,
            remote,
          ],
          { encoding: "utf8" },
        );
        if (run.status !== 0) throw new Error(`${label} ${cipher} failed:\n${run.stderr}`);
        const { seconds, binding } = JSON.parse(run.stdout.trim().split("\n").pop());
        if (binding !== (label === "native"))
          throw new Error(`${label}: binding loaded = ${binding}`);
        const key = `${cipher} ${label}`;
        results.set(key, [...(results.get(key) ?? []), mib / seconds]);
      }
    }
  }
  console.log(
    `SFTP upload (fastPut) of ${mib} MiB, ${runs} alternating rounds, Node ${process.version}`,
  );
  console.log("| cipher | ssh2 crypto | median MiB/s | min–max |");
  console.log("| --- | --- | --- | --- |");
  for (const [key, rates] of results) {
    const [cipher, label] = key.split(" ");
    const sorted = [...rates].sort((a, b) => a - b);
    console.log(
      `| ${cipher} | ${label} | ${median(rates).toFixed(1)} | ${sorted[0].toFixed(1)}–${sorted.at(-1).toFixed(1)} |`,
    );
  }
} finally {
  await sshd.stop();
  await rm(work, { recursive: true, force: true });
}
