import type { TestProject } from "vitest/node";
import { cephInstalled, type S3Server, startCeph } from "./ceph.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The shared gateway, or null when it could not start outside CI. */
    s3Server: S3Server | null;
    /** Why there is no gateway (shown by the skipped suites). */
    s3Unavailable: string;
  }
}

/**
 * One Ceph RGW gateway for the whole run; every test takes its own bucket or prefix. Under CI a
 * gateway that cannot start fails the run; elsewhere the S3 suites skip and say why.
 */
export async function startSharedGateway(
  project: TestProject,
): Promise<(() => Promise<void>) | undefined> {
  const strict = process.env.CI === "true" || process.env.CI === "1";
  const unavailable = (reason: string) => {
    if (strict) throw new Error(`the S3 test server is required under CI: ${reason}`);
    project.provide("s3Server", null);
    project.provide("s3Unavailable", reason);
    return undefined;
  };
  const missing = await cephInstalled();
  if (missing.length > 0) {
    return unavailable(
      `Ceph is not installed (missing ${missing.join(", ")}); run apt-get install -y radosgw ceph-mon ceph-osd`,
    );
  }
  let cluster: Awaited<ReturnType<typeof startCeph>>;
  try {
    cluster = await startCeph();
  } catch (error) {
    return unavailable((error as Error).message);
  }
  const { endpoint, accessKeyId, secretAccessKey, region } = cluster;
  project.provide("s3Server", { endpoint, accessKeyId, secretAccessKey, region });
  project.provide("s3Unavailable", "");
  if (process.env.DISTRIBUTOR_S3_TIMING === "1") {
    console.log(`Ceph RGW started at ${endpoint} in ${cluster.startedInMs} ms`);
  }
  return () => cluster.stop();
}
