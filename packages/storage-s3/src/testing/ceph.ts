import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Where a running gateway answers, and the one user it knows. */
export interface S3Server {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

export interface CephCluster extends S3Server {
  directory: string;
  startedInMs: number;
  stop(): Promise<void>;
}

/** Binaries the throwaway cluster needs (Debian: `apt-get install radosgw ceph-mon ceph-osd`). */
export const CEPH_BINARIES = [
  "monmaptool",
  "ceph-mon",
  "ceph-osd",
  "ceph",
  "radosgw",
  "radosgw-admin",
];

/**
 * Starts a single-node Ceph cluster (one monitor, one memstore OSD, one RGW gateway) with every
 * path in a temp directory and every port on loopback. Ceph RGW enforces `If-None-Match: *` and
 * `If-Match` on PUT, which the conditional-write tests need.
 */
export async function startCeph(): Promise<CephCluster> {
  const started = Date.now();
  const directory = await mkdtemp(join(tmpdir(), "distributor-ceph-"));
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map(stopChild));
    await rm(directory, { recursive: true, force: true });
  };
  try {
    const [monPort, rgwPort] = [await freePort(), await freePort()];
    const fsid = randomUUID();
    const conf = join(directory, "ceph.conf");
    for (const sub of ["run", "log", "mon", "osd/ceph-0", "rgw"]) {
      await mkdir(join(directory, sub), { recursive: true });
    }
    await writeFile(conf, cephConf(directory, fsid, monPort, rgwPort));
    const c = ["-c", conf];
    await run("monmaptool", [
      "--create",
      "--addv",
      "a",
      `[v2:127.0.0.1:${monPort}]`,
      "--fsid",
      fsid,
      join(directory, "monmap"),
    ]);
    await run("ceph-mon", [...c, "--mkfs", "-i", "a", "--monmap", join(directory, "monmap")]);
    children.push(daemon(directory, "mon", "ceph-mon", [...c, "-i", "a", "-f"]));
    const osdUuid = randomUUID();
    const { stdout } = await run("ceph", [...c, "--connect-timeout", "20", "osd", "new", osdUuid]);
    const osdId = stdout.trim();
    if (osdId !== "0")
      throw new Error(`ceph osd new returned ${JSON.stringify(osdId)}, expected 0`);
    await run("ceph-osd", [...c, "-i", osdId, "--mkfs", "--osd-uuid", osdUuid]);
    children.push(daemon(directory, "osd", "ceph-osd", [...c, "-i", osdId, "-f"]));
    children.push(daemon(directory, "rgw", "radosgw", [...c, "-n", "client.rgw.a", "-f"]));
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await waitForGateway(endpoint, children, directory, 60_000);
    const accessKeyId = "DISTRIBUTORTEST";
    const secretAccessKey = randomUUID().replaceAll("-", "");
    await run("radosgw-admin", [
      ...c,
      "user",
      "create",
      "--uid",
      "distributor",
      "--display-name",
      "distributor tests",
      "--access-key",
      accessKeyId,
      "--secret",
      secretAccessKey,
    ]);
    return {
      endpoint,
      accessKeyId,
      secretAccessKey,
      region: "us-east-1",
      directory,
      startedInMs: Date.now() - started,
      stop,
    };
  } catch (error) {
    const logs = await tailLogs(directory);
    await stop();
    throw new Error(`could not start Ceph RGW: ${(error as Error).message}\n${logs}`, {
      cause: error,
    });
  }
}

function cephConf(directory: string, fsid: string, monPort: number, rgwPort: number): string {
  return `[global]
fsid = ${fsid}
mon_host = v2:127.0.0.1:${monPort}
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
auth_allow_insecure_global_id_reclaim = true
mon_warn_on_insecure_global_id_reclaim_allowed = false
ms_mon_client_mode = crc
ms_bind_ipv6 = false
osd_objectstore = memstore
memstore_device_bytes = 4294967296
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_autoscale_mode = off
osd_pool_default_pg_num = 8
run_dir = ${directory}/run
log_file = ${directory}/log/$name.log
admin_socket = ${directory}/run/$name.asok
pid_file = ${directory}/run/$name.pid
mon_data = ${directory}/mon/$cluster-$id
osd_data = ${directory}/osd/$cluster-$id
keyring = /dev/null

[client.rgw.a]
rgw_frontends = beast endpoint=127.0.0.1:${rgwPort}
rgw_data = ${directory}/rgw
# Deleted objects' data is garbage-collected after two hours by default; the OSD keeps it in
# memory, so large tests and benchmarks would fill it.
rgw_gc_obj_min_wait = 0
rgw_gc_processor_period = 5
`;
}

function daemon(directory: string, label: string, command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], cwd: directory });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-4000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.on("exit", () => {
    void writeFile(join(directory, "log", `${label}.out`), output).catch(() => undefined);
  });
  return child;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

async function waitForGateway(
  endpoint: string,
  children: ChildProcess[],
  directory: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const dead = children.find((child) => child.exitCode !== null || child.signalCode !== null);
    if (dead !== undefined) {
      throw new Error(
        `${dead.spawnfile} exited (${dead.exitCode ?? dead.signalCode}) in ${directory}`,
      );
    }
    try {
      const response = await fetch(endpoint, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`the gateway at ${endpoint} did not answer within ${timeoutMs} ms`);
}

async function tailLogs(directory: string): Promise<string> {
  const parts: string[] = [];
  for (const name of ["mon.out", "osd.out", "rgw.out", "client.rgw.a.log"]) {
    const text = await readFile(join(directory, "log", name), "utf8").catch(() => "");
    if (text !== "") parts.push(`--- ${name}\n${text.slice(-1500)}`);
  }
  return parts.join("\n");
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

/** Whether every binary is on the PATH. */
export async function cephInstalled(): Promise<string[]> {
  const missing: string[] = [];
  for (const binary of CEPH_BINARIES) {
    try {
      await run("sh", ["-c", `command -v ${binary}`]);
    } catch {
      missing.push(binary);
    }
  }
  return missing;
}
