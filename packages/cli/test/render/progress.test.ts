import type { RunActionReport, RunReport } from "@distributor/publish";
import { describe, expect, it } from "vitest";
import {
  createRunProgress,
  formatBytes,
  formatDuration,
  type ProgressClock,
} from "../../src/render/progress.js";

const ERASE = "\r\u001b[K";

/** A clock that moves only when told, running due timers in order as it goes. */
function fakeClock() {
  let now = 0;
  let nextId = 0;
  const timers = new Map<number, { at: number; callback: () => void }>();
  const clock: ProgressClock = {
    now: () => now,
    setTimeout: (callback, ms) => {
      nextId += 1;
      timers.set(nextId, { at: now + ms, callback });
      return nextId;
    },
    clearTimeout: (handle) => {
      timers.delete(handle as number);
    },
  };
  const advance = (ms: number) => {
    const until = now + ms;
    for (;;) {
      const due = [...timers.entries()]
        .filter(([, timer]) => timer.at <= until)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      timers.delete(due[0]);
      now = due[1].at;
      due[1].callback();
    }
    now = until;
  };
  return { clock, advance, pending: () => timers.size };
}

/** Everything written to stderr, with the fake time of each write. */
function recordingSink(clock: ProgressClock) {
  const writes: { at: number; text: string }[] = [];
  return {
    sink: { write: (text: string) => writes.push({ at: clock.now(), text }) },
    writes,
    /** The status lines drawn, without the erase sequence. */
    lines: () =>
      writes
        .filter((w) => w.text.startsWith(ERASE) && w.text.length > ERASE.length)
        .map((w) => w.text.slice(ERASE.length)),
  };
}

function action(overrides: Partial<RunActionReport> = {}): RunActionReport {
  return {
    pipeline_id: "reports",
    destination_id: "archive",
    bundle_path: "",
    source_id: "reports.1",
    signer: null,
    action: "publish_new",
    reason: "",
    status: "published",
    primary_url: null,
    release_id: null,
    preview_url: null,
    outputs: [],
    error: null,
    warnings: [],
    ...overrides,
  };
}

function outputs(sizes: readonly number[]): RunActionReport["outputs"] {
  return sizes.map((size, index) => ({
    path: `f${index}.bin`,
    kind: "source" as const,
    source_path: `f${index}.bin`,
    transform: null,
    url: null,
    sha256: "sha256:00",
    size,
  }));
}

function setup(columns?: number) {
  const time = fakeClock();
  const recorder = recordingSink(time.clock);
  const progress = createRunProgress({
    stderr: recorder.sink,
    clock: time.clock,
    ...(columns === undefined ? {} : { columns: () => columns }),
  });
  return { ...time, ...recorder, progress };
}

describe("run progress renderer", () => {
  it("draws at most ten times a second, however many events arrive, and ends on the latest counts", () => {
    const { progress, advance, writes, lines } = setup();
    progress.onEvent({
      type: "validation_start",
      pipeline_id: "reports",
      bundles: 1,
      files: 1000,
      bytes: 1000 * 1024,
    });
    for (let i = 0; i < 1000; i++) {
      advance(1);
      progress.onEvent({
        type: "file_validated",
        pipeline_id: "reports",
        bundle_path: "",
        path: `f${i}`,
        size: 1024,
      });
    }
    advance(200);
    const draws = writes.filter((w) => w.text.startsWith(ERASE));
    // 1001 events over one second: the first draw, then one per 100 ms, and the trailing one
    // for the last event.
    expect(draws.length).toBeGreaterThanOrEqual(10);
    expect(draws.length).toBeLessThanOrEqual(12);
    expect(draws.at(-1)?.at).toBe(1100);
    for (let i = 1; i < draws.length; i++) {
      expect((draws[i]?.at ?? 0) - (draws[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(100);
    }
    expect(lines().at(-1)).toMatch(
      /^validating reports: 1000\/1000 files, 1000\.0 KiB\/1000\.0 KiB, 100%/,
    );
  });

  it("shows done/total files and bytes, percentage, rate and ETA", () => {
    const { progress, advance, lines } = setup();
    progress.onEvent({
      type: "validation_start",
      pipeline_id: "reports",
      bundles: 2,
      files: 4,
      bytes: 4 * 1024 * 1024,
    });
    expect(lines()).toEqual(["validating reports: 0/4 files, 0 B/4.0 MiB, 0%"]);
    advance(1000);
    progress.onEvent({
      type: "file_validated",
      pipeline_id: "reports",
      bundle_path: "a",
      path: "x",
      size: 1024 * 1024,
    });
    // One MiB in one second, three to go.
    expect(lines().at(-1)).toBe(
      "validating reports: 1/4 files, 1.0 MiB/4.0 MiB, 25%, 1.0 files/s, 1.0 MiB/s, ETA 3s",
    );
  });

  it("estimates a mixed tree sanely from the first draw: many small files, then a big one", () => {
    const { progress, advance, lines } = setup();
    const small = Array.from({ length: 1000 }, () => 1024);
    const big = 1024 * 1024 * 1024;
    progress.onEvent({
      type: "plan",
      action: action({ status: "publishing", outputs: outputs([...small, big]) }),
    });
    const etas: number[] = [];
    const written = (index: number, size: number) =>
      progress.onEvent({
        type: "output_written",
        pipeline_id: "reports",
        destination_id: "archive",
        path: `f${index}.bin`,
        size,
      });
    // A thousand 1 KiB files in the first second, then the 1 GiB file takes two more.
    for (let i = 0; i < small.length; i++) {
      advance(1);
      written(i, 1024);
      const eta = /ETA (\d+)s$/.exec(lines().at(-1) ?? "")?.[1];
      if (eta !== undefined) etas.push(Number(eta));
    }
    advance(100);
    expect(lines().at(-1)).toBe(
      "publishing reports/archive: 1000/1001 files, 1000.0 KiB/1.0 GiB, 19%, 909 files/s, 909.1 KiB/s, ETA 5s",
    );
    // Every estimate on the way was a few seconds: the job takes three (bytes alone said 17 min).
    expect(etas.length).toBeGreaterThanOrEqual(9);
    for (const eta of etas) {
      expect(eta).toBeGreaterThanOrEqual(3);
      expect(eta).toBeLessThanOrEqual(6);
    }
    advance(1900);
    written(1000, big);
    advance(100);
    expect(lines().at(-1)).toMatch(
      /^publishing reports\/archive: 1001\/1001 files, .*, 100%, .*, ETA 0s$/,
    );
  });

  it("follows a write through publishing and cleaning up, then clears its line", () => {
    const { progress, advance, lines, writes } = setup();
    progress.onEvent({
      type: "plan",
      action: action({
        bundle_path: "2026/06",
        status: "publishing",
        outputs: outputs([3000, 1000]),
      }),
    });
    expect(lines().at(-1)).toBe("publishing reports/archive 2026/06: 0/2 files, 0 B/3.9 KiB, 0%");
    advance(500);
    progress.onEvent({
      type: "output_written",
      pipeline_id: "reports",
      destination_id: "archive",
      path: "f0.bin",
      size: 3000,
    });
    expect(lines().at(-1)).toBe(
      "publishing reports/archive 2026/06: 1/2 files, 2.9 KiB/3.9 KiB, 50%, 2.0 files/s, 5.9 KiB/s, ETA 1s",
    );
    advance(500);
    progress.onEvent({
      type: "cleanup_start",
      pipeline_id: "reports",
      destination_id: "archive",
      bundle_path: "2026/06",
      deletes: 3,
    });
    expect(lines().at(-1)).toBe("cleaning up reports/archive 2026/06: deleting 3 replaced outputs");
    advance(500);
    progress.onEvent({
      type: "cleanup_done",
      pipeline_id: "reports",
      destination_id: "archive",
      bundle_path: "2026/06",
    });
    expect(writes.at(-1)?.text).toBe(ERASE);
  });

  it("draws nothing for a skip or a dry run's planned write", () => {
    const { progress, advance, writes } = setup();
    progress.onEvent({ type: "pipeline_start", pipeline_id: "reports" });
    progress.onEvent({
      type: "plan",
      action: action({ action: "skip_same", status: "skipped", outputs: outputs([5]) }),
    });
    progress.onEvent({
      type: "plan",
      action: action({ status: "planned", outputs: outputs([5]) }),
    });
    advance(1000);
    expect(writes).toEqual([]);
  });

  it("cuts the line to the terminal's width", () => {
    const { progress, lines } = setup(30);
    progress.onEvent({
      type: "validation_start",
      pipeline_id: "a-pipeline-with-a-long-name",
      bundles: 1,
      files: 10,
      bytes: 10,
    });
    const line = lines().at(-1) ?? "";
    expect([...line].length).toBe(29);
    expect(line).toBe("validating a-pipeline-with-a…");
  });

  it("clears its line and prints the summary when the run is over, and draws nothing after", () => {
    const { progress, advance, writes, pending } = setup();
    progress.onEvent({
      type: "plan",
      action: action({ status: "publishing", outputs: outputs([1024 * 1024, 1024 * 1024]) }),
    });
    progress.onEvent({
      type: "output_written",
      pipeline_id: "reports",
      destination_id: "archive",
      path: "f0.bin",
      size: 1024 * 1024,
    });
    advance(2000);
    const report: RunReport = {
      dry_run: false,
      actions: [
        action({ outputs: outputs([1024 * 1024, 1024 * 1024]) }),
        action({ destination_id: "mirror", action: "skip_same", status: "skipped" }),
      ],
      pipeline_errors: [],
      warnings: [],
      interrupted: false,
    };
    progress.finish(report);
    expect(writes.at(-2)?.text).toBe(ERASE);
    expect(writes.at(-1)?.text).toBe(
      "published 2 files, 2.0 MiB in 2.0 s (1.0 MiB/s); 1 skipped\n",
    );
    expect(pending()).toBe(0);
    const count = writes.length;
    progress.onEvent({ type: "pipeline_start", pipeline_id: "late" });
    advance(1000);
    expect(writes.length).toBe(count);
  });

  it("stops without a summary", () => {
    const { progress, writes } = setup();
    progress.onEvent({
      type: "validation_start",
      pipeline_id: "r",
      bundles: 1,
      files: 1,
      bytes: 1,
    });
    progress.stop();
    expect(writes.map((w) => w.text)).toEqual([
      `${ERASE}validating r: 0/1 files, 0 B/1 B, 0%`,
      ERASE,
    ]);
  });

  it.each<[string, RunReport, string]>([
    [
      "every destination skipped",
      {
        dry_run: false,
        actions: [action({ status: "skipped" }), action({ status: "skipped" })],
        pipeline_errors: [],
        warnings: [],
        interrupted: false,
      },
      "nothing to publish: every destination skipped",
    ],
    [
      "a dry run",
      {
        dry_run: true,
        actions: [action({ status: "planned", outputs: outputs([2048]) })],
        pipeline_errors: [],
        warnings: [],
        interrupted: false,
      },
      "dry run: would publish 1 file, 2.0 KiB",
    ],
    [
      "failures only",
      {
        dry_run: false,
        actions: [action({ status: "failed" })],
        pipeline_errors: [{ pipeline_id: "other", code: "no_bundles", message: "none" }],
        warnings: [],
        interrupted: false,
      },
      "nothing published; 2 failed",
    ],
  ])("summarises %s", (_name, report, expected) => {
    const { progress, writes } = setup();
    progress.finish(report);
    expect(writes.map((w) => w.text)).toEqual([`${expected}\n`]);
  });

  it("formats bytes and remaining times for people", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(102_400_000)).toBe("97.7 MiB");
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(2.1)).toBe("3s");
    expect(formatDuration(125)).toBe("2m05s");
    expect(formatDuration(3720)).toBe("1h02m");
  });
});
