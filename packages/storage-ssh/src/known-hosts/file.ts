import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readFile, realpath, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { type KnownHostEntry, parseKnownHosts } from "./parse.js";

/** The entries of a `known_hosts` file; a file that does not exist has none. */
export async function readKnownHosts(file: string): Promise<KnownHostEntry[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  return parseKnownHosts(text);
}

// Appends within this process run one after another, so two backends accepting keys at the same
// time do not both start from the old bytes and lose one line.
const pending = new Map<string, Promise<void>>();

/**
 * Appends one line to a `known_hosts` file atomically: the old bytes plus the line are written to
 * a temp file beside it, flushed, and renamed over it, so a reader or a crash sees the old file
 * or the new one, never half a line. A symlinked file is updated at its target. A missing file
 * (and its directory, mode 0700 like `~/.ssh`) is created with mode 0600.
 */
export function appendKnownHost(file: string, line: string): Promise<void> {
  const previous = pending.get(file) ?? Promise.resolve();
  const next = previous.catch(() => undefined).then(() => appendNow(file, line));
  pending.set(file, next);
  return next.finally(() => {
    if (pending.get(file) === next) pending.delete(file);
  });
}

async function appendNow(file: string, line: string): Promise<void> {
  let target = file;
  let mode = 0o600;
  let old = Buffer.alloc(0);
  try {
    const stats = await lstat(file);
    if (stats.isSymbolicLink()) target = await realpath(file);
    const real = stats.isSymbolicLink() ? await lstat(target) : stats;
    mode = real.mode & 0o777;
    old = await readFile(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  }
  const separator = old.length > 0 && old[old.length - 1] !== 0x0a ? "\n" : "";
  const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(temp, "wx", mode);
  let renamed = false;
  try {
    try {
      await handle.writeFile(Buffer.concat([old, Buffer.from(separator + line, "utf8")]));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
    renamed = true;
  } finally {
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
}
