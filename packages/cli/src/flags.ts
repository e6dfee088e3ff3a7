import type { OutputFormat } from "./command.js";
import { UsageError } from "./errors.js";

/** Parsed flags as yargs hands them over: values are strings, booleans or arrays of them. */
export type RawFlags = Readonly<Record<string, unknown>>;

/** The values of `--format`, the default first; completion offers them in this order. */
export const OUTPUT_FORMATS: readonly OutputFormat[] = ["text", "json"];

/** `--format`: text (the default) or json. */
export function outputFormat(flags: RawFlags): OutputFormat {
  const value = flags.format;
  if (Array.isArray(value)) throw new UsageError("--format may be given only once");
  if (value === undefined) return "text";
  const format = OUTPUT_FORMATS.find((name) => name === value);
  if (format !== undefined) return format;
  // An empty value (`--format` at the end of the line) is as wrong as `--format xml`.
  throw new UsageError(`format must be text or json, not ${JSON.stringify(value)}`);
}

/** A single-valued string flag, or undefined when it was not given. */
export function optionalString(flags: RawFlags, name: string): string | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new UsageError(`--${name} may be given only once`);
  if (typeof value !== "string" || value === "") {
    throw new UsageError(`--${name} requires a value`);
  }
  return value;
}

/** A string flag the command cannot run without. */
export function requiredString(flags: RawFlags, name: string, command: string): string {
  const value = optionalString(flags, name);
  if (value === undefined) throw new UsageError(`${command} requires --${name}`);
  return value;
}

/** A repeatable string flag, in command-line order. */
export function stringList(flags: RawFlags, name: string): string[] {
  const value = flags[name];
  if (value === undefined) return [];
  const values = Array.isArray(value) ? value : [value];
  if (values.length === 0) throw new UsageError(`--${name} requires a value`);
  return values.map((item) => {
    if (typeof item !== "string" || item === "") throw new UsageError(`--${name} requires a value`);
    return item;
  });
}

export function booleanFlag(flags: RawFlags, name: string): boolean {
  const value = flags[name];
  // Repeated switches: the last one wins, as with any other flag parser.
  if (Array.isArray(value)) return value.at(-1) === true;
  return value === true;
}

/** Positional arguments the command does not declare, after the command words. */
export function extraPositionals(flags: RawFlags, commandWords: number): string[] {
  const words = flags._;
  if (!Array.isArray(words)) return [];
  return words.slice(commandWords).map(String);
}

export function rejectPositionals(flags: RawFlags, command: string, commandWords: number): void {
  if (extraPositionals(flags, commandWords).length > 0) {
    throw new UsageError(`${command} does not accept positional arguments`);
  }
}

/**
 * Boolean flags written as `--dry-run=<value>`: yargs reads any value but `true` as false, which
 * would turn a typo into the opposite of what the operator meant.
 */
export function checkBooleanAssignments(argv: readonly string[], booleans: ReadonlySet<string>) {
  for (const token of argv) {
    if (token === "--") return;
    const match = /^--([^=]+)=(.*)$/s.exec(token);
    if (match === null) continue;
    const [, name = "", value] = match;
    if (booleans.has(name) && value !== "true" && value !== "false") {
      throw new UsageError(`--${name} takes no value, got ${JSON.stringify(token)}`);
    }
  }
}

/**
 * Joins a flag that takes a value with a following value that starts with a dash and a digit
 * (`--lock-timeout -5s` → `--lock-timeout=-5s`). yargs reads such a word as the short flags
 * `-5` and `-s`; joined, it reaches the handler, which says what is wrong with the value (a
 * negative duration), exactly as for the `=` form. Switches (`booleanFlags`) take no value and
 * are left alone, and nothing after `--` is touched.
 */
export function joinDashValues(
  argv: readonly string[],
  booleanFlags: ReadonlySet<string>,
): string[] {
  const joined: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const token = argv[index] as string;
    if (token === "--") {
      joined.push(...argv.slice(index));
      break;
    }
    const next = argv[index + 1];
    const name = /^--([^=]+)$/.exec(token)?.[1];
    if (name !== undefined && !booleanFlags.has(name) && next !== undefined && /^-\d/.test(next)) {
      joined.push(`${token}=${next}`);
      index += 1;
    } else {
      joined.push(token);
    }
  }
  return joined;
}
