import { describe, expect, it } from "vitest";
import type { PlannedWrite } from "../../src/plan/plan-types.js";
import { writePhases } from "../../src/plan/write-order.js";

const write = (path: string): PlannedWrite => ({
  output: { path, kind: "source", sourcePath: path, sha256: "sha256:x", size: 1 },
  overwrite: false,
});
const paths = (phases: PlannedWrite[][]) => phases.map((phase) => phase.map((w) => w.output.path));

describe("writePhases", () => {
  it("writes assets, then pages, then index pages, each phase in its order", () => {
    const phases = writePhases(
      ["index.html", "app.js", "docs/index.HTML", "about.html", "style.css", "docs/a.htm"].map(
        write,
      ),
    );
    expect(paths(phases)).toEqual([
      ["app.js", "style.css"],
      ["about.html", "docs/a.htm"],
      ["index.html", "docs/index.HTML"],
    ]);
  });

  it("leaves out empty phases", () => {
    expect(paths(writePhases(["a.txt", "b.png"].map(write)))).toEqual([["a.txt", "b.png"]]);
    expect(writePhases([])).toEqual([]);
  });
});
