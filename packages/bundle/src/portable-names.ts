import {
  compareLogicalPaths,
  LEASE_FILE_NAME,
  runSteps,
  STATE_FILE_NAME,
  type Steps,
} from "@distributor/storage";

/**
 * Names that are different here but one name on some stores: `case` twins differ only by letter
 * case (one file on case-insensitive stores: Windows, macOS by default, many SFTP servers on
 * them); `normalization` twins differ only by Unicode normalisation, NFC against NFD (one file on
 * normalising stores: macOS HFS+, some SMB and NFS servers); `reserved` names are one name with a
 * file distributor keeps beside the outputs (`.Distributor.json` and the state file, the lease
 * likewise) on such stores, where writing one overwrites the other.
 */
export interface NameCollision {
  kind: "case" | "normalization" | "reserved";
  /** The colliding paths (files or directories), in byte order; `reserved`: the one path. */
  paths: string[];
}

/** Distributor's own names that a bundle's names must not fold to. */
const RESERVED_NAMES = [STATE_FILE_NAME, LEASE_FILE_NAME];

/**
 * Every group of colliding names among `paths` and their parent directories, and every name that
 * folds to a reserved name without being it. A collision is reported at the shallowest directory
 * or file where it happens: `Docs/a.txt` and `docs/b.txt` collide as `Docs` and `docs`, and
 * nothing below them is reported again.
 */
export function nameCollisions(paths: readonly string[]): NameCollision[] {
  return runSteps(nameCollisionsSteps(paths));
}

/** Names looked at between two pauses of `nameCollisionsSteps`. */
const STEP_NAMES = 2000;

/** `nameCollisions` as steps that pause every few thousand names (see `Steps`). */
export function* nameCollisionsSteps(paths: readonly string[]): Steps<NameCollision[]> {
  const sorted = yield* sortedCollisionsSteps(paths);
  if (sorted !== undefined) return sorted;
  const names = new Set<string>();
  // The directory of the path before: sorted paths share theirs, already added with its parents.
  let directory: string | undefined;
  for (const [index, path] of paths.entries()) {
    if (index % STEP_NAMES === STEP_NAMES - 1) yield;
    if (directory === undefined || !isDirectlyIn(path, directory)) {
      // The path's directory and each directory above it.
      for (let slash = path.indexOf("/"); slash !== -1; slash = path.indexOf("/", slash + 1)) {
        names.add(path.slice(0, slash));
      }
      const last = path.lastIndexOf("/");
      directory = last === -1 ? undefined : path.slice(0, last);
    }
    names.add(path);
  }
  // A name per folded key, or the names when there are more (no list per name: 10⁶ of them).
  const groups = new Map<string, string | string[]>();
  let folded = 0;
  for (const name of names) {
    if (++folded % STEP_NAMES === 0) yield;
    const key = foldName(name);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, name);
    else if (typeof group === "string") groups.set(key, [group, name]);
    else group.push(name);
  }
  const colliding = new Set(
    [...groups].filter(([, members]) => typeof members !== "string").map(([key]) => key),
  );
  const collisions: NameCollision[] = [];
  for (const key of colliding) {
    // Below a colliding directory everything collides again: only the directory is reported.
    if (ancestors(key).some((above) => colliding.has(above))) continue;
    const members = [...(groups.get(key) ?? [])].sort(compareLogicalPaths);
    const nfc = new Set(members.map((member) => member.normalize("NFC")));
    collisions.push({ kind: nfc.size === 1 ? "normalization" : "case", paths: members });
  }
  yield;
  const reserved = new Set(RESERVED_NAMES.map(foldName));
  const reservedLengths = new Set(RESERVED_NAMES.map((name) => name.length));
  let checked = 0;
  for (const name of names) {
    if (++checked % STEP_NAMES === 0) yield;
    const segment = name.slice(name.lastIndexOf("/") + 1);
    // An ASCII segment folds to one of the same length: most need no folding to be ruled out.
    if (!reservedLengths.has(segment.length) && !NON_ASCII.test(segment)) continue;
    if (RESERVED_NAMES.includes(segment) || !reserved.has(foldName(segment))) continue;
    collisions.push({ kind: "reserved", paths: [name] });
  }
  return collisions.sort((a, b) => compareLogicalPaths(a.paths[0] ?? "", b.paths[0] ?? ""));
}

/** The names of one directory, by folded name: the name, or the names when more fold so. */
interface DirectoryNames {
  /** The directory's path; `""` for the root. */
  path: string;
  names: Map<string, string | string[]>;
}

/**
 * `nameCollisionsSteps` for paths in strictly increasing byte order (a manifest's), with the same
 * collisions, holding only the names of the directories the current path lies in: a directory's
 * entries are contiguous in that order, so each directory's names are compared among themselves
 * (only entries of one directory can be one name) and let go once the walk has left it. Undefined
 * when the paths are not in that order.
 */
function* sortedCollisionsSteps(paths: readonly string[]): Steps<NameCollision[] | undefined> {
  for (let index = 1; index < paths.length; index++) {
    if (index % STEP_NAMES === 0) yield;
    if (compareLogicalPaths(paths[index - 1] as string, paths[index] as string) >= 0)
      return undefined;
  }
  const collisions: NameCollision[] = [];
  const reserved = new Set(RESERVED_NAMES.map(foldName));
  const reservedLengths = new Set(RESERVED_NAMES.map((name) => name.length));
  const open: DirectoryNames[] = [{ path: "", names: new Map() }];
  const close = (directory: DirectoryNames) => {
    for (const members of directory.names.values()) {
      if (typeof members === "string") continue;
      members.sort(compareLogicalPaths);
      const nfc = new Set(members.map((member) => member.normalize("NFC")));
      collisions.push({ kind: nfc.size === 1 ? "normalization" : "case", paths: members });
    }
  };
  const add = (directory: DirectoryNames, name: string) => {
    const segment = directory.path === "" ? name : name.slice(directory.path.length + 1);
    const key = foldName(segment);
    const group = directory.names.get(key);
    if (group === name || (Array.isArray(group) && group.includes(name))) return;
    if (group === undefined) directory.names.set(key, name);
    else if (typeof group === "string") directory.names.set(key, [group, name]);
    else group.push(name);
    // An ASCII segment folds to one of the same length: most need no folding to be ruled out.
    if (!reservedLengths.has(segment.length) && !NON_ASCII.test(segment)) return;
    if (!RESERVED_NAMES.includes(segment) && reserved.has(key)) {
      collisions.push({ kind: "reserved", paths: [name] });
    }
  };
  for (const [index, path] of paths.entries()) {
    if (index % STEP_NAMES === STEP_NAMES - 1) yield;
    let top = open.at(-1) as DirectoryNames;
    while (top.path !== "" && !isWithin(path, top.path)) {
      close(open.pop() as DirectoryNames);
      top = open.at(-1) as DirectoryNames;
    }
    const from = top.path === "" ? 0 : top.path.length + 1;
    for (let slash = path.indexOf("/", from); slash !== -1; slash = path.indexOf("/", slash + 1)) {
      const directory = path.slice(0, slash);
      add(top, directory);
      top = { path: directory, names: new Map() };
      open.push(top);
    }
    add(top, path);
  }
  for (const directory of open) close(directory);
  // Below a colliding directory everything collides again: only the directory is reported.
  const colliding = new Set(
    collisions.filter((c) => c.kind !== "reserved").map((c) => foldName(c.paths[0] ?? "")),
  );
  // Reserved names after the others, as the general comparison lists them: of two collisions
  // of one first path, the stable sort below keeps that order.
  const reservedLast = [
    ...collisions.filter((c) => c.kind !== "reserved"),
    ...collisions.filter((c) => c.kind === "reserved"),
  ];
  return reservedLast
    .filter(
      (c) =>
        c.kind === "reserved" ||
        !ancestors(foldName(c.paths[0] ?? "")).some((above) => colliding.has(above)),
    )
    .sort((a, b) => compareLogicalPaths(a.paths[0] ?? "", b.paths[0] ?? ""));
}

/** Whether `path` lies below `directory`. */
function isWithin(path: string, directory: string): boolean {
  return (
    path.length > directory.length &&
    path.charCodeAt(directory.length) === 0x2f &&
    path.startsWith(directory)
  );
}

/** Whether `path` names an entry of `directory` itself (not of a directory below it). */
function isDirectlyIn(path: string, directory: string): boolean {
  return (
    path.length > directory.length + 1 &&
    path.charCodeAt(directory.length) === 0x2f &&
    path.startsWith(directory) &&
    path.indexOf("/", directory.length + 1) === -1
  );
}

/** A collision as a one-line message; names are shown with their code points where not ASCII. */
export function describeNameCollision(collision: NameCollision): string {
  const shown = collision.paths.map(showName).join(", ");
  if (collision.kind === "reserved") {
    const name = collision.paths[0] ?? "";
    const folded = foldName(name.slice(name.lastIndexOf("/") + 1));
    const own = RESERVED_NAMES.find((reserved) => foldName(reserved) === folded) ?? folded;
    return `${shown}: is one name with distributor's own ${own} on case-insensitive or normalising stores`;
  }
  return collision.kind === "case"
    ? `${shown}: names differ only by letter case and are one name on case-insensitive stores`
    : `${shown}: names differ only by Unicode normalisation (NFC/NFD) and are one name on normalising stores`;
}

/** Any code unit past ASCII: a name without one is the same in every normalisation form. */
const NON_ASCII = /[\u0080-\uffff]/;

function foldName(name: string): string {
  return (NON_ASCII.test(name) ? name.normalize("NFC") : name).toLowerCase();
}

function ancestors(key: string): string[] {
  const segments = key.split("/");
  return segments.slice(1).map((_, index) => segments.slice(0, index + 1).join("/"));
}

function showName(name: string): string {
  return [...name]
    .map((char) => {
      const code = char.codePointAt(0) ?? 0;
      return code < 0x80 ? char : `\\u{${code.toString(16)}}`;
    })
    .join("");
}
