import { readdirSync, readFileSync } from "node:fs";
import type { Manifest } from "@distributor/bundle";
import {
  parseSharedRootState,
  parseSingleOwnerState,
  type SharedRootState,
  type SingleOwnerState,
} from "@distributor/state";

const fixturesDir = new URL("./fixtures/", import.meta.url);

/** Text of a fixture file in test/fixtures. */
export function fixture(name: string): string {
  return readFileSync(new URL(name, fixturesDir), "utf8");
}

/** A fixture as the serialiser writes it: compact JSON on one line, then a newline. */
export function compactFixture(name: string): string {
  return `${JSON.stringify(JSON.parse(fixture(name)))}\n`;
}

/** Fixture text as a JSON object, for tests that mutate one field. */
export function fixtureJson(name: string): Record<string, unknown> {
  return JSON.parse(fixture(name)) as Record<string, unknown>;
}

export function fixtureNames(): string[] {
  return readdirSync(fixturesDir).sort();
}

/** Invalid fixture name → the error fragment parsing it must report. */
export function expectedErrors(): Record<string, string> {
  return fixtureJson("expected-errors.json") as Record<string, string>;
}

/**
 * The schema 2 fixture: reports/archive, outputs report.md (source) and report.html (generated).
 * A copy tests may change in place (what parsing returns is frozen).
 */
export function validSingleOwnerState(): SingleOwnerState {
  return structuredClone(parseSingleOwnerState(fixture("valid-v2.json")));
}

/**
 * The schema 3 fixture: owners reports/archive (report.md) and reports/html (report.html). A copy
 * tests may change in place.
 */
export function validSharedRootState(): SharedRootState {
  return structuredClone(parseSharedRootState(fixture("valid-v3.json")));
}

/** The manifest embedded in every valid fixture (report.md and summary.txt). */
export function validManifest(): Manifest {
  return validSingleOwnerState().source.manifest;
}

export const at = (text: string): Date => new Date(text);

export const HOUR = 60 * 60 * 1000;
