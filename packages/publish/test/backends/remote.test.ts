import { isStorageError, type StorageError } from "@distributor/storage";
import { describe, expect, it } from "vitest";
import { loadAdapter, remoteBackends } from "../../src/backends/remote.js";
import type { S3Location } from "../../src/config/types.js";

const location: S3Location = {
  backend: "s3",
  bucket: "reports",
  prefix: "daily",
  region: "us-east-1",
  forcePathStyle: true,
};

describe("remoteBackends", () => {
  it("offers s3 and ssh and leaves local to the default", () => {
    expect(Object.keys(remoteBackends()).sort()).toEqual(["s3", "ssh"]);
  });

  it("names the package to install when an adapter is missing", async () => {
    const missing = "@distributor/storage-not-installed";
    const error = await loadAdapter(
      missing,
      location,
      () => import(/* @vite-ignore */ missing),
    ).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(isStorageError(error, "unsupported")).toBe(true);
    expect((error as StorageError).message).toBe(
      "open backend s3:reports/daily: the s3 backend needs the package @distributor/storage-not-installed, which is not installed (npm install @distributor/storage-not-installed)",
    );
  });

  it("keeps other failures of loading an adapter as they are", async () => {
    const broken = new Error("adapter exploded at import");
    await expect(
      loadAdapter("@distributor/storage-s3", location, () => Promise.reject(broken)),
    ).rejects.toBe(broken);
  });
});
