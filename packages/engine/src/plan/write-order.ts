import type { PlannedWrite } from "./plan-types.js";

/**
 * The phases a publication writes its outputs in, each finished before the next starts: every
 * output that is not an HTML page (styles, scripts, images, data), then the HTML pages, then the
 * index pages (`index.html`). A reader who loads a new page meanwhile finds the assets it links
 * already there, and the entry points change last; deletes follow the state write, as always.
 * Within a phase the writes keep their order and run in parallel. Empty phases are left out.
 */
export function writePhases(writes: readonly PlannedWrite[]): PlannedWrite[][] {
  const assets: PlannedWrite[] = [];
  const pages: PlannedWrite[] = [];
  const indexes: PlannedWrite[] = [];
  for (const write of writes) {
    const path = write.output.path.toLowerCase();
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (name === "index.html" || name === "index.htm") indexes.push(write);
    else if (path.endsWith(".html") || path.endsWith(".htm")) pages.push(write);
    else assets.push(write);
  }
  return [assets, pages, indexes].filter((phase) => phase.length > 0);
}
