import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { addAbortSignal, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import {
  bundleDigest,
  bundleDigestText,
  createDigestStream,
  digestStream,
  fileDigest,
  isSha256Digest,
} from "../src/digest.js";

const run = promisify(execFile);

describe("file and bundle digests", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it("matches the worked example of docs/design/bundles.md", () => {
    const file = fileDigest("# Report\nSunny.\n");
    expect(file).toEqual({
      sha256: "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6",
      size: 16,
    });
    const files = [{ path: "report.md", ...file }];
    expect(bundleDigestText(files)).toBe(
      "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6 16 report.md\n",
    );
    expect(bundleDigest(files)).toBe(
      "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
    );
  });

  it("agrees with a bundle digest derived independently with sha256sum", async () => {
    dir = await mkdtemp(join(tmpdir(), "bundle-digest-"));
    const contents: Record<string, string> = {
      "notes/b.txt": "second file\nwith two lines\n",
      "a-report.md": "# Report\nSunny.\n",
    };
    await mkdir(join(dir, "notes"));
    for (const [path, text] of Object.entries(contents)) await writeFile(join(dir, path), text);

    // Files digested by the coreutils binary, lines built and hashed by it too.
    const paths = Object.keys(contents).sort((a, b) =>
      Buffer.compare(Buffer.from(a), Buffer.from(b)),
    );
    const { stdout } = await run("sha256sum", ["--", ...paths], { cwd: dir });
    const lines: string[] = [];
    for (const output of stdout.trimEnd().split("\n")) {
      const match = /^([0-9a-f]{64}) {2}(.+)$/.exec(output);
      if (match === null) throw new Error(`unexpected sha256sum output: ${output}`);
      const [, hex, path] = match as unknown as [string, string, string];
      const { size } = await stat(join(dir, path));
      lines.push(`sha256:${hex} ${size} ${path}\n`);
    }
    await writeFile(join(dir, "digest-lines.txt"), lines.join(""));
    const { stdout: bundleOut } = await run("sha256sum", ["digest-lines.txt"], { cwd: dir });
    const expected = `sha256:${bundleOut.slice(0, 64)}`;

    const files = Object.entries(contents)
      .reverse()
      .map(([path, text]) => ({ path, ...fileDigest(text) }));
    expect(bundleDigestText(files)).toBe(lines.join(""));
    expect(bundleDigest(files)).toBe(expected);
  });

  it("orders lines by UTF-8 bytes, not UTF-16 code units", () => {
    const sha = `sha256:${"0".repeat(64)}`;
    const paths = ["z", "\u{1d44e}", "\uff41", "a/b", "a-b", "é"];
    const text = bundleDigestText(paths.map((path) => ({ path, sha256: sha, size: 1 })));
    const order = text
      .trimEnd()
      .split("\n")
      .map((line) => line.slice(sha.length + 3));
    const byBytes = [...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect(order).toEqual(byBytes);
    // The supplementary character sorts after U+FF41 in bytes although UTF-16 puts it first.
    expect(order.slice(-2)).toEqual(["\uff41", "\u{1d44e}"]);
  });

  it("does not reorder the caller's array", () => {
    const sha = `sha256:${"1".repeat(64)}`;
    const files = [
      { path: "b", sha256: sha, size: 1 },
      { path: "a", sha256: sha, size: 2 },
    ];
    bundleDigest(files);
    expect(files.map((file) => file.path)).toEqual(["b", "a"]);
  });

  it("hashes and counts bytes flowing through a digest stream without changing them", async () => {
    const chunks = [Buffer.from("# Report\n"), Buffer.from("Sunny.\n")];
    const through = createDigestStream();
    expect(() => through.result).toThrow(/only after the stream ends/);
    const received: Buffer[] = [];
    await pipeline(Readable.from(chunks), through, async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) received.push(chunk);
    });
    expect(Buffer.concat(received).toString()).toBe("# Report\nSunny.\n");
    expect(through.bytes).toBe(16);
    expect(through.result).toEqual(fileDigest("# Report\nSunny.\n"));
  });

  it("digests a stream chunk by chunk", async () => {
    const chunk = Buffer.alloc(64 * 1024, 7);
    const source = Readable.from(
      (function* () {
        for (let index = 0; index < 40; index++) yield chunk;
      })(),
    );
    const digest = await digestStream(source);
    expect(digest).toEqual(fileDigest(Buffer.concat(Array.from({ length: 40 }, () => chunk))));
  });

  it("stops digesting when the signal is aborted", async () => {
    const controller = new AbortController();
    const source = Readable.from(
      (function* () {
        yield Buffer.from("a");
        controller.abort(new Error("stop"));
        yield Buffer.from("b");
      })(),
    );
    await expect(digestStream(source, { signal: controller.signal })).rejects.toThrow("stop");
  });

  it("rejects with the signal's reason when the source is destroyed by the abort", async () => {
    const controller = new AbortController();
    const reason = new Error("cancelled by operator");
    let pulls = 0;
    // A backend stream bound to the signal: the abort destroys it with a generic AbortError.
    const source = addAbortSignal(
      controller.signal,
      new Readable({
        read() {
          pulls++;
          if (pulls === 1) this.push(Buffer.from("first chunk"));
          else controller.abort(reason);
        },
      }),
    );
    await expect(digestStream(source, { signal: controller.signal })).rejects.toBe(reason);
  });

  it("recognises only sha256: plus 64 lowercase hex", () => {
    expect(isSha256Digest(`sha256:${"a".repeat(64)}`)).toBe(true);
    expect(isSha256Digest(`sha256:${"A".repeat(64)}`)).toBe(false);
    expect(isSha256Digest(`sha256:${"a".repeat(63)}`)).toBe(false);
    expect(isSha256Digest("a".repeat(64))).toBe(false);
    expect(isSha256Digest(`sha256:${"a".repeat(64)}\n`)).toBe(false);
  });
});
