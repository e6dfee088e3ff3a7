import type { RunEvent, RunReport } from "@distributor/publish";
import type { TextSink } from "../io.js";

/** Time and timers, injected so the throttle is testable without waiting. */
export interface ProgressClock {
  /** Milliseconds, monotonic. */
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface ProgressOptions {
  stderr: TextSink;
  clock?: ProgressClock;
  /** The terminal's width when known; lines are cut to fit. */
  columns?: () => number | undefined;
  /** Least time between two draws; default 100 ms (at most 10 a second). */
  intervalMs?: number;
}

/** The status line of a `run` on an interactive stderr, fed the run's events. */
export interface RunProgress {
  onEvent(event: RunEvent): void;
  /** Clears the status line and prints the summary of the finished run. */
  finish(report: RunReport): void;
  /** Clears the status line, printing nothing else (the run threw or was interrupted). */
  stop(): void;
}

type PhaseName = "validating" | "publishing" | "cleaning up";

interface Phase {
  name: PhaseName;
  /** `pipeline` or `pipeline/destination` (and the bundle path when it is not the root). */
  label: string;
  files: number;
  bytes: number;
  totalFiles: number;
  totalBytes: number;
  /** For `cleaning up`: how many outputs are deleted, null when the bundle path is cleared. */
  deletes?: number | null;
  startedAt: number;
}

const ERASE_LINE = "\r\u001b[K";

/**
 * What one file costs besides its bytes, counted as bytes: creating, renaming and flushing a
 * file (or a request per object remotely) take about as long as moving a quarter MiB does on a
 * local disk (about 1 ms against about 300 MB/s here). Progress, rate and ETA count a phase's work
 * as its bytes plus this much per file, so a tree whose many small files go first does not
 * promise hours for the big file that follows, nor a finished job at 99 % of its files.
 */
export const FILE_COST_BYTES = 256 * 1024;

export const systemClock: ProgressClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    // A pending redraw never keeps the process alive.
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Draws one status line in place (`\r` and erase-line): the phase (validating, publishing,
 * cleaning up), the pipeline and destination, done/total files and bytes, percentage, rate and
 * ETA. Events only update counters; drawing is throttled to one draw per `intervalMs`, with a
 * trailing draw so the line never lags the work by more than that.
 */
export function createRunProgress(options: ProgressOptions): RunProgress {
  const { stderr } = options;
  const clock = options.clock ?? systemClock;
  const interval = options.intervalMs ?? 100;
  const startedAt = clock.now();
  let phase: Phase | undefined;
  let shown = false;
  let lastDraw = Number.NEGATIVE_INFINITY;
  let timer: unknown;
  let done = false;

  const draw = () => {
    timer = undefined;
    if (done) return;
    const now = clock.now();
    lastDraw = now;
    if (phase === undefined) {
      if (shown) stderr.write(ERASE_LINE);
      shown = false;
      return;
    }
    stderr.write(`${ERASE_LINE}${fit(statusLine(phase, now), options.columns?.())}`);
    shown = true;
  };

  const changed = () => {
    if (timer !== undefined || done) return;
    const wait = lastDraw + interval - clock.now();
    if (wait <= 0) draw();
    else timer = clock.setTimeout(draw, wait);
  };

  const start = (name: PhaseName, label: string, totalFiles: number, totalBytes: number) => {
    phase = { name, label, files: 0, bytes: 0, totalFiles, totalBytes, startedAt: clock.now() };
    return phase;
  };

  const end = () => {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    done = true;
    if (shown) stderr.write(ERASE_LINE);
    shown = false;
  };

  return {
    onEvent(event) {
      switch (event.type) {
        case "validation_start":
          start("validating", event.pipeline_id, event.files, event.bytes);
          break;
        case "file_validated":
          if (phase?.name !== "validating") return;
          phase.files += 1;
          phase.bytes += event.size;
          break;
        case "plan": {
          const { action } = event;
          // Only a write (not a dry run's planned one) is followed by output_written events.
          if (action.status !== "publishing") return;
          let bytes = 0;
          for (const output of action.outputs) bytes += output.size;
          start(
            "publishing",
            targetLabel(action.pipeline_id, action.destination_id, action.bundle_path),
            action.outputs.length,
            bytes,
          );
          break;
        }
        case "output_written":
          if (phase?.name !== "publishing") return;
          phase.files += 1;
          phase.bytes += event.size;
          break;
        case "cleanup_start":
          start(
            "cleaning up",
            targetLabel(event.pipeline_id, event.destination_id, event.bundle_path),
            0,
            0,
          ).deletes = event.deletes;
          break;
        case "bundle_validated":
          return;
        case "cleanup_done":
        case "destination_done":
        case "pipeline_error":
          if (phase === undefined) return;
          phase = undefined;
          break;
        default:
          return;
      }
      changed();
    },
    finish(report) {
      end();
      stderr.write(`${summary(report, clock.now() - startedAt)}\n`);
    },
    stop: end,
  };
}

function targetLabel(pipelineId: string, destinationId: string, bundlePath: string): string {
  const target = `${pipelineId}/${destinationId}`;
  return bundlePath === "" || bundlePath === "." ? target : `${target} ${bundlePath}`;
}

/** The status line of a phase at `now` (milliseconds on the same clock as `startedAt`). */
function statusLine(phase: Phase, now: number): string {
  const head = `${phase.name} ${phase.label}`;
  if (phase.name === "cleaning up") {
    return phase.deletes === null || phase.deletes === undefined
      ? `${head}: clearing what the new state does not record`
      : `${head}: deleting ${count(phase.deletes, "replaced output")}`;
  }
  const parts = [
    `${phase.files}/${phase.totalFiles} files`,
    `${formatBytes(phase.bytes)}/${formatBytes(phase.totalBytes)}`,
    `${percent(phase)}%`,
  ];
  const seconds = (now - phase.startedAt) / 1000;
  const done = work(phase.files, phase.bytes);
  if (seconds > 0 && done > 0) {
    parts.push(`${formatRate(phase.files / seconds)} files/s`);
    parts.push(`${formatBytes(phase.bytes / seconds)}/s`);
    const remaining = Math.max(0, work(phase.totalFiles, phase.totalBytes) - done);
    parts.push(`ETA ${formatDuration(remaining / (done / seconds))}`);
  }
  return `${head}: ${parts.join(", ")}`;
}

/** A phase's work: its bytes, plus `FILE_COST_BYTES` for every file. */
function work(files: number, bytes: number): number {
  return bytes + files * FILE_COST_BYTES;
}

/** Whole percent of the phase's work done (files and bytes together); 100 only when complete. */
function percent(phase: Phase): number {
  const total = work(phase.totalFiles, phase.totalBytes);
  if (total <= 0) return 100;
  return Math.min(100, Math.floor((work(phase.files, phase.bytes) / total) * 100));
}

/** Files a second: whole numbers from 10 up, one decimal below. */
function formatRate(perSecond: number): string {
  return perSecond >= 10 ? String(Math.round(perSecond)) : perSecond.toFixed(1);
}

/** The line printed when the run is over. */
export function summary(report: RunReport, elapsedMs: number): string {
  const by = (status: string) => report.actions.filter((action) => action.status === status);
  const published = by("published");
  const planned = by("planned");
  const skipped = by("skipped").length;
  const failed = by("failed").length + report.pipeline_errors.length;
  const totals = (actions: typeof published) => {
    let files = 0;
    let bytes = 0;
    for (const action of actions) {
      files += action.outputs.length;
      for (const output of action.outputs) bytes += output.size;
    }
    return { files, bytes };
  };
  const extra = [
    skipped > 0 ? `${skipped} skipped` : "",
    failed > 0 ? `${failed} failed` : "",
  ].filter((part) => part !== "");
  const tail = extra.length > 0 ? `; ${extra.join(", ")}` : "";
  const seconds = elapsedMs / 1000;
  if (published.length > 0) {
    const { files, bytes } = totals(published);
    const rate = seconds > 0 ? ` (${formatBytes(bytes / seconds)}/s)` : "";
    return `published ${count(files, "file")}, ${formatBytes(bytes)} in ${seconds.toFixed(1)} s${rate}${tail}`;
  }
  if (planned.length > 0) {
    const { files, bytes } = totals(planned);
    return `dry run: would publish ${count(files, "file")}, ${formatBytes(bytes)}${tail}`;
  }
  if (failed === 0 && skipped > 0) return "nothing to publish: every destination skipped";
  return `nothing published${tail}`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** Bytes in binary units: `512 B`, `1.5 KiB`, `97.7 MiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${Math.round(bytes)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** A remaining time, rounded up to whole seconds: `3s`, `2m05s`, `1h02m`. */
export function formatDuration(seconds: number): string {
  const total = Math.ceil(seconds);
  if (total < 60) return `${total}s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes}m${String(total % 60).padStart(2, "0")}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, "0")}m`;
}

/** Cuts a line to one less than the terminal's columns, so drawing it never wraps. */
function fit(line: string, columns: number | undefined): string {
  if (columns === undefined || columns <= 1) return line;
  const characters = [...line];
  if (characters.length < columns) return line;
  return `${characters.slice(0, columns - 2).join("")}…`;
}
