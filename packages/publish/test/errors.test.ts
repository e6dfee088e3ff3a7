import { BundleValidationError, ManifestError } from "@distributor/bundle";
import {
  AmbiguousCommitError,
  LeaseLostError,
  SourceChangedError,
  StateChangedError,
} from "@distributor/engine";
import { UncommittedError } from "@distributor/engine/testing";
import { StorageError, type StorageErrorKind } from "@distributor/storage";
import { describe, expect, it } from "vitest";
import { actionError, actionErrorCode, bundleRefusalCode, errorCode } from "../src/errors.js";

const errno = (code: string) => Object.assign(new Error(`${code}: failed`), { code });

const storage = (kind: StorageErrorKind, cause?: unknown, detail?: string) =>
  new StorageError({
    kind,
    operation: "write file",
    backend: "local",
    path: "a/b.txt",
    ...(detail === undefined ? {} : { detail }),
    ...(cause === undefined ? {} : { cause }),
  });

describe("actionErrorCode", () => {
  it.each([
    ["EACCES", "permission", "permission_denied"],
    ["EPERM", "permission", "permission_denied"],
    ["EROFS", "permission", "read_only"],
    ["ENOSPC", "unavailable", "no_space"],
    ["EDQUOT", "unavailable", "no_space"],
    ["ETIMEDOUT", "unavailable", "timeout"],
  ] as const)("names a storage failure caused by %s by its cause", (code, kind, expected) => {
    expect(actionErrorCode(storage(kind, errno(code)))).toBe(expected);
  });

  it("finds the cause below several wrappers", () => {
    const wrapped = storage("unavailable", new Error("stream failed", { cause: errno("ENOSPC") }));
    expect(actionErrorCode(new UncommittedError("write failed", [], { cause: wrapped }))).toBe(
      "no_space",
    );
  });

  it.each([
    ["not_found", "not_found"],
    ["already_exists", "already_exists"],
    ["conflict", "conflict"],
    ["unavailable", "unavailable"],
    ["permission", "permission_denied"],
    ["unsupported", "unsupported"],
    ["limit_exceeded", "limit_exceeded"],
  ] as const)("names a storage failure of kind %s without a known cause %s", (kind, expected) => {
    expect(actionErrorCode(storage(kind, new Error("opaque")))).toBe(expected);
  });

  it("calls an adapter's timed-out request a timeout", () => {
    const ssh = storage("unavailable", undefined, "timed out: no answer from u@h:22 within 30 s");
    expect(actionErrorCode(ssh)).toBe("timeout");
    const sdk = Object.assign(new Error("socket hang up"), { name: "TimeoutError" });
    expect(actionErrorCode(storage("unavailable", sdk))).toBe("timeout");
  });

  it("keeps the protocol's own codes, also before the commit", () => {
    expect(actionErrorCode(new LeaseLostError("lease broken"))).toBe("lease_lost");
    expect(actionErrorCode(new AmbiguousCommitError("no answer"))).toBe("commit_unknown");
    expect(actionErrorCode(new StateChangedError("moved on"))).toBe("state_changed");
    const lost = new UncommittedError("stopped", [], { cause: new LeaseLostError("broken") });
    expect(actionErrorCode(lost)).toBe("lease_lost");
  });

  it("names a write whose source changed by that, not by the storage failure", () => {
    const write = storage("unavailable", new SourceChangedError("r.txt: source changed"));
    expect(actionErrorCode(write)).toBe("source_changed");
  });

  it("calls an interrupt aborted and anything unknown failed", () => {
    expect(actionErrorCode(new DOMException("stopped", "AbortError"))).toBe("aborted");
    expect(actionErrorCode(Object.assign(new Error("x"), { name: "AbortError" }))).toBe("aborted");
    expect(actionErrorCode(new Error("something"))).toBe("failed");
    expect(actionErrorCode("not an error")).toBe("failed");
  });

  it("leaves the envelope's codes as they were", () => {
    expect(errorCode(storage("permission", errno("EROFS")))).toBe("storage_permission");
  });

  it("pairs the code with the message", () => {
    expect(actionError(storage("unavailable", errno("ENOSPC"), "no space left"))).toEqual({
      code: "no_space",
      message: "write file local:a/b.txt: no space left",
    });
  });
});

describe("the code of a refused bundle", () => {
  const issue = (code: "empty_bundle" | "missing_file" | "signer_not_allowed") => ({
    code,
    path: "",
    message: `${code} happened`,
  });

  it("is empty_bundle however the emptiness was found", () => {
    const listing = new BundleValidationError([issue("empty_bundle")]);
    const manifest = new ManifestError("files must not be empty", { code: "empty_bundle" });

    expect([errorCode(listing), bundleRefusalCode(listing)]).toEqual([
      "empty_bundle",
      "empty_bundle",
    ]);
    expect([errorCode(manifest), bundleRefusalCode(manifest)]).toEqual([
      "empty_bundle",
      "empty_bundle",
    ]);
  });

  it("keeps a refused signature's code", () => {
    const refused = new BundleValidationError([issue("signer_not_allowed")]);

    expect(errorCode(refused)).toBe("signer_not_allowed");
    expect(bundleRefusalCode(refused)).toBe("signer_not_allowed");
  });

  it("folds anything else into bundle_invalid, or manifest_invalid for a manifest", () => {
    const missing = new BundleValidationError([issue("missing_file")]);
    const several = new BundleValidationError([issue("empty_bundle"), issue("missing_file")]);
    const manifest = new ManifestError("id must be a string");

    expect([errorCode(missing), bundleRefusalCode(missing)]).toEqual([
      "bundle_invalid",
      "bundle_invalid",
    ]);
    expect([errorCode(several), bundleRefusalCode(several)]).toEqual([
      "bundle_invalid",
      "bundle_invalid",
    ]);
    expect([errorCode(manifest), bundleRefusalCode(manifest)]).toEqual([
      "manifest_invalid",
      "bundle_invalid",
    ]);
  });
});
