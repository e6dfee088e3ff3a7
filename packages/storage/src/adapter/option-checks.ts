import { isSecretName } from "../secrets.js";

/**
 * Checks of the options object an adapter's factory is given (`openS3Location`,
 * `openSshLocation`). Plain-JavaScript callers can pass anything, so each check names the key and
 * the value it found; the factory collects every problem and throws one `ConfigError` before
 * any IO. Keys are named as the options object spells them (`timeouts.connectMs`).
 */
export class OptionChecks {
  readonly issues: string[];
  readonly #values: Readonly<Record<string, unknown>>;
  readonly #prefix: string;

  /** `values` is the options object, or a nested one under `prefix` (`timeouts.`). */
  constructor(values: Readonly<Record<string, unknown>>, prefix = "", issues: string[] = []) {
    this.#values = values;
    this.#prefix = prefix;
    this.issues = issues;
  }

  /** A non-empty string without whitespace at either end; `undefined` when absent and optional. */
  text(key: string, required: boolean): string | undefined {
    const value = this.#values[key];
    if (value === undefined) {
      if (required) this.issues.push(`${this.#prefix}${key} is missing`);
      return undefined;
    }
    if (typeof value !== "string" || value.trim() === "" || value.trim() !== value) {
      this.#wrong(key, "a non-empty string without surrounding spaces");
      return undefined;
    }
    return value;
  }

  /** Any string, the empty one included (a path or prefix whose `""` means the root). */
  string(key: string, required: boolean): string | undefined {
    const value = this.#values[key];
    if (value === undefined) {
      if (required) this.issues.push(`${this.#prefix}${key} is missing`);
      return undefined;
    }
    if (typeof value !== "string") {
      this.#wrong(key, "a string");
      return undefined;
    }
    return value;
  }

  /** An integer from `min` to `max`, when present. */
  integer(key: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
    const value = this.#values[key];
    if (value === undefined) return;
    if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
      const unbounded = max === Number.MAX_SAFE_INTEGER;
      const range = unbounded ? `of at least ${min}` : `from ${min} to ${max}`;
      this.#wrong(key, min === 1 && unbounded ? "a positive integer" : `an integer ${range}`);
    }
  }

  boolean(key: string): void {
    const value = this.#values[key];
    if (value !== undefined && typeof value !== "boolean") this.#wrong(key, "true or false");
  }

  /** One of `allowed`, when present. */
  oneOf(key: string, allowed: readonly string[]): void {
    const value = this.#values[key];
    if (value !== undefined && !allowed.includes(value as string)) {
      this.#wrong(key, allowed.join(" or "));
    }
  }

  /** A secret reference: the name of an environment variable (and of a file of secrets). */
  secretName(key: string, required: boolean): void {
    const value = this.#values[key];
    if (value === undefined) {
      if (required) this.issues.push(`${this.#prefix}${key} is missing`);
      return;
    }
    if (typeof value !== "string" || !isSecretName(value)) {
      this.#wrong(key, "a secret name (letters, digits and _, not starting with a digit)");
    }
  }

  /** The checks of a nested object, when present; their issues join these. */
  nested(key: string): OptionChecks | undefined {
    const value = this.#values[key];
    if (value === undefined) return undefined;
    if (!isRecord(value)) {
      this.#wrong(key, "an object");
      return undefined;
    }
    return new OptionChecks(value, `${this.#prefix}${key}.`, this.issues);
  }

  /** Records a problem of `key` in the caller's own words. */
  problem(key: string, detail: string): void {
    this.issues.push(`${this.#prefix}${key} ${detail}`);
  }

  #wrong(key: string, expected: string): void {
    this.issues.push(`${this.#prefix}${key} must be ${expected}, not ${shown(this.#values[key])}`);
  }
}

/** Whether `value` is a plain object whose keys can be checked. */
export function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A value as an issue shows it: JSON where it has one, else its type. */
export function shown(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
    case "number":
    case "boolean":
      return String(value);
    case "undefined":
      return "undefined";
    case "object":
      return "an object";
    default:
      return `a ${typeof value}`;
  }
}
