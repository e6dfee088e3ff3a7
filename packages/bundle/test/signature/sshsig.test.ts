import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SshWireError } from "../../src/signature/ssh-wire.js";
import { dearmor, parseSshsigBlob, sshsigProblem } from "../../src/signature/sshsig.js";
import { TempDirs } from "../helpers.js";
import { makeKey, sshSign } from "../ssh-keygen.js";

const dirs = new TempDirs();
const message = new TextEncoder().encode("the manifest's bytes\n");
let blob: Uint8Array;
let fingerprint: string;

beforeAll(async () => {
  const dir = await dirs.make();
  const key = await makeKey(dir, "producer", "ecdsa-256");
  const file = join(dir, "manifest.json");
  await writeFile(file, message);
  await sshSign(file, key);
  fingerprint = key.fingerprint;
  blob = dearmor(await readFile(`${file}.sig`));
}, 30_000);

afterAll(() => dirs.cleanup());

describe("parseSshsigBlob", () => {
  it("reads the fields ssh-keygen -Y sign writes", () => {
    const signature = parseSshsigBlob(blob);
    expect(signature.namespace).toBe("distributor");
    expect(signature.keyType).toBe("ecdsa-sha2-nistp256");
    expect(signature.hashAlgorithm).toBe("sha512");
    expect(signature.fingerprint).toBe(fingerprint);
  });

  it("refuses version 0, which no signer writes and the signature does not cover", () => {
    const older = new Uint8Array(blob);
    older[9] = 0;
    expect(() => parseSshsigBlob(older)).toThrow("is SSHSIG version 0; version 1 is the first");
  });

  it("refuses a version newer than 1, as PROTOCOL.sshsig requires", () => {
    const newer = new Uint8Array(blob);
    newer[9] = 2;
    expect(() => parseSshsigBlob(newer)).toThrow(
      "is SSHSIG version 2, newer than the supported version 1",
    );
  });
});

describe("sshsigProblem", () => {
  it("verifies the untouched signature", () => {
    expect(sshsigProblem(parseSshsigBlob(blob), message, "distributor")).toBeUndefined();
  });

  it("never accepts a signature with a byte changed, and fails only as SshWireError", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: blob.length - 1 }),
        fc.integer({ min: 1, max: 255 }),
        (index, flip) => {
          const altered = new Uint8Array(blob);
          altered[index]! ^= flip;
          let problem: string | undefined;
          try {
            problem = sshsigProblem(parseSshsigBlob(altered), message, "distributor");
          } catch (error) {
            expect(error).toBeInstanceOf(SshWireError);
            return;
          }
          // Every byte counts: the reserved field OpenSSH ignores is empty here.
          expect(problem).toBeDefined();
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("fails only as SshWireError on arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const withMagic = new Uint8Array([...new TextEncoder().encode("SSHSIG"), ...bytes]);
        for (const candidate of [bytes, withMagic]) {
          try {
            sshsigProblem(parseSshsigBlob(candidate), message, "distributor");
          } catch (error) {
            expect(error).toBeInstanceOf(SshWireError);
          }
        }
      }),
    );
  });
});
