import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Small ext4 images on loop devices, for the power-loss replays on the real kernel
// (docs/design/power-loss.md, "The real kernel"). Images live in /dev/shm where there is one, so
// that the loop device's flushes to its backing file cost nothing.

const run = (command: string, args: readonly string[]) =>
  execFileSync(command, args, { stdio: ["ignore", "pipe", "pipe"] }).toString();

/** A directory for images and their mount points, on tmpfs where the machine has one. */
export function imageDirectory(prefix: string): string {
  const base = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  return mkdtempSync(join(base, prefix));
}

/** Makes a sparse image of `mib` MiB holding a fresh ext4 file system in its default mode. */
export function makeExt4Image(path: string, mib: number): void {
  run("truncate", ["-s", `${mib}M`, path]);
  run("mkfs.ext4", ["-q", "-F", path]);
}

/** Mount points mounted by this process and not yet unmounted, for `unmountAll`. */
const mounted = new Set<string>();

/**
 * Loop-mounts the image at `path` read-write on `at` (made when missing): ext4 replays its
 * journal, as after a power cut. `mount -o loop` detaches the loop device on unmount.
 */
export function mountImage(path: string, at: string): void {
  mkdirSync(at, { recursive: true });
  run("mount", ["-t", "ext4", "-o", "loop", path, at]);
  mounted.add(at);
}

export function unmountImage(at: string): void {
  run("umount", [at]);
  mounted.delete(at);
}

/** Unmounts whatever is still mounted (after a failure), ignoring what fails; then detaches. */
export function unmountAll(images: readonly string[] = []): void {
  for (const at of [...mounted]) {
    try {
      unmountImage(at);
    } catch {
      try {
        run("umount", ["-l", at]);
      } catch {
        // Nothing more to do from here.
      }
      mounted.delete(at);
    }
  }
  for (const image of images) {
    try {
      for (const line of run("losetup", ["-j", image]).split("\n")) {
        const device = line.split(":")[0];
        if (device) run("losetup", ["-d", device]);
      }
    } catch {
      // Not attached, or gone already.
    }
  }
}

/**
 * Copies the image at `from` to `to` as the device holds it now: the loop device writes through
 * the host's page cache, so the backing file has every write the file system sent to the device.
 */
export function copyImage(from: string, to: string): void {
  run("cp", ["--sparse=always", from, to]);
}

/**
 * Why this machine cannot mount an ext4 image on a loop device, or undefined when it can (tried
 * once, on a tiny image).
 */
export function loopMountUnavailable(): string | undefined {
  if (process.platform !== "linux") return `loop devices are Linux's (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "mounting a loop device needs root";
  let dir: string | undefined;
  try {
    dir = imageDirectory("distributor-loop-probe-");
    const image = join(dir, "probe.img");
    makeExt4Image(image, 8);
    mountImage(image, join(dir, "mnt"));
    unmountImage(join(dir, "mnt"));
    return undefined;
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return `could not make and mount an ext4 image on a loop device: ${stderr || String(error)}`;
  } finally {
    unmountAll();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}
