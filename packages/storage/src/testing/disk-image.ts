import {
  link,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  utimes,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import type { FsImageEntry } from "./memory-fs-driver.js";

/**
 * The tree below `dir` as a `MemoryFsDriver` image: directories, files (hard links share their
 * inode number) and symlinks. A missing `dir` is an empty tree.
 */
export async function readDirectoryImage(dir: string): Promise<FsImageEntry[]> {
  const image: FsImageEntry[] = [];
  const visit = async (relative: string) => {
    let names: string[];
    try {
      names = await readdir(join(dir, relative));
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT" && relative === "") return;
      throw error;
    }
    for (const name of names.sort()) {
      const path = relative === "" ? name : `${relative}/${name}`;
      const stats = await lstat(join(dir, path));
      if (stats.isDirectory()) {
        image.push({ path, kind: "directory" });
        await visit(path);
      } else if (stats.isSymbolicLink()) {
        image.push({ path, kind: "symlink", target: await readlink(join(dir, path)) });
      } else if (stats.isFile()) {
        const bytes = await readFile(join(dir, path));
        image.push({ path, kind: "file", inode: stats.ino, bytes, mtimeMs: stats.mtimeMs });
      }
    }
  };
  await visit("");
  return image;
}

/**
 * Makes the tree below `dir` exactly `image` (what a machine finds on its disk after a power
 * cut): everything below `dir` is removed, then the image written, hard links as hard links,
 * each file with its mtime.
 */
export async function writeDirectoryImage(
  dir: string,
  image: readonly FsImageEntry[],
): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const written = new Map<number, string>();
  for (const entry of image) {
    const path = join(dir, entry.path);
    if (entry.kind === "directory") {
      await mkdir(path);
    } else if (entry.kind === "symlink") {
      await symlink(entry.target, path);
    } else {
      const first = written.get(entry.inode);
      if (first !== undefined) {
        await link(first, path);
        continue;
      }
      await writeFile(path, entry.bytes);
      const seconds = entry.mtimeMs / 1000;
      await utimes(path, seconds, seconds);
      written.set(entry.inode, path);
    }
  }
}
