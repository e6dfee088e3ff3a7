// The builders the configuration schema is written with: messages, limits, and the JSON Schema
// keywords that go with rules written as code (see schema.ts).
import { globProblem } from "@distributor/engine";
import { pathProblem, SECRET_NAME_PATTERN } from "@distributor/storage";
import * as v from "valibot";
import { parseDuration } from "./duration.js";
import { parseSize, SIZE_UNITS } from "./size.js";

/** Message of the issue valibot reports for a key the schema does not know. */
export const UNKNOWN_KEY = "unknown key";

/** Message of the issue for a value that should be a mapping. */
export const NOT_A_MAPPING = "must be a mapping";

/** Pipeline, destination and upload token ids: the same rule as bundle ids (docs/design/bundles.md). */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const DURATION_HINT = "must be a duration such as 500ms, 45s, 30m, 1h30m or 168h";
const SIZE_HINT = "must be a size such as 512KiB, 64MiB or 10GB";

/**
 * The JSON Schema keywords equivalent to the code-written rule beside it. Ignored at run time;
 * read by the config-schema.json generator.
 */
export function jsonSchema<TInput>(
  keywords: Record<string, unknown>,
): v.MetadataAction<TInput, Record<string, unknown>> {
  return v.metadata<TInput, Record<string, unknown>>(keywords);
}

function isMapping(input: unknown): input is Record<string, unknown> {
  return typeof input === "object" && input !== null && !Array.isArray(input);
}

/** `a or b`, `a, b or c`: the wording of every choice message. */
export function orList(options: readonly string[]): string {
  if (options.length <= 1) return options.join("");
  return `${options.slice(0, -1).join(", ")} or ${options.at(-1)}`;
}

export function mapping<const TEntries extends v.ObjectEntries>(entries: TEntries) {
  // strictObject alone would take a list for a mapping with keys "0", "1", ...
  return v.pipe(
    v.custom<Record<string, unknown>>(isMapping, NOT_A_MAPPING),
    v.strictObject(entries, UNKNOWN_KEY),
  );
}

export function list<const TItem extends v.GenericSchema>(item: TItem) {
  return v.array(item, "must be a list");
}

export function text() {
  return v.pipe(v.string("must be a string"), v.minLength(1, "must not be empty"));
}

export function flag() {
  return v.boolean("must be true or false");
}

export function choice<const TOptions extends readonly [string, ...string[]]>(options: TOptions) {
  return v.picklist(options, `must be ${orList(options)}`);
}

/** The most outputs a destination may write at once (`transfers`). */
export const MAX_TRANSFERS = 64;

/** Most committed releases `releases.keep` may keep: each holds a directory tree of links. */
export const MAX_RELEASES_KEPT = 1000;
/** S3's bounds on a multipart part (`multipart.part_size`), and the most parts sent at once. */
export const MIN_PART_SIZE = 5 * 1024 * 1024;
export const MAX_PART_SIZE = 5 * 1024 * 1024 * 1024;
export const MAX_PART_CONCURRENCY = 16;

/** The largest `max_state_size`: about the longest text a state file is read back as. */
export const MAX_STATE_SIZE = 512 * 1024 * 1024;

/**
 * `max_state_size`: a state file is read back as one text, so it may be no larger than the
 * longest string the runtime holds (24 bytes short of 512 MiB on 64-bit Node.js; the engine
 * refuses to write a state of those last bytes).
 */
export function stateSize() {
  return v.pipe(
    size(),
    v.rawCheck(({ dataset, addIssue }) => {
      if (dataset.typed && dataset.value > MAX_STATE_SIZE) {
        addIssue({
          message: "must be at most 512MiB, about the largest state file that can be read back",
        });
      }
    }),
    // A size is a string with a unit: its bound is approximated by the description.
    jsonSchema({ $comment: "at most 512MiB" }),
  );
}

export function integer(minimum: number, belowMinimum: string, maximum = Number.MAX_SAFE_INTEGER) {
  return v.pipe(
    v.number("must be a whole number"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const value = dataset.value;
      if (!Number.isSafeInteger(value)) addIssue({ message: "must be a whole number" });
      else if (value < minimum) addIssue({ message: belowMinimum });
      else if (value > maximum) addIssue({ message: `must be at most ${maximum}` });
    }),
    jsonSchema({ type: "integer", minimum, maximum }),
  );
}

const MAX_DELETES_HINT =
  'must be a whole number of outputs (such as 100) or a percentage of the managed outputs (such as "20%")';

/**
 * `max_deletes`: a count, or a percentage of the owner's managed outputs. valibot reports a string
 * no percentage could be made of as matching neither; the percentage's own reason (out of
 * range) is the one that tells the operator what to change.
 */
export function deleteLimit() {
  return v.union(
    [integer(0, "must be zero or more"), deletePercentage()],
    (issue) =>
      issue.issues?.find((option) => option.kind === "transformation")?.message ?? MAX_DELETES_HINT,
  );
}

/** `max_deletes: "20%"`: a percentage from 0 to 100 of the owner's managed outputs. */
function deletePercentage() {
  return v.pipe(
    v.string(MAX_DELETES_HINT),
    jsonSchema({ pattern: "^\\d+(?:\\.\\d+)?%$" }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      // A signed percentage is read too, so that "-5%" is called out of range like "150%".
      const match = /^(-?)(\d+(?:\.\d+)?)%$/.exec(dataset.value);
      if (match === null) {
        addIssue({ message: MAX_DELETES_HINT });
        return NEVER;
      }
      const percent = Number(match[2]);
      if (match[1] === "-" || percent > 100) {
        addIssue({
          message: `must be a percentage from 0% to 100% of the managed outputs; ${JSON.stringify(dataset.value)} is out of range`,
        });
        return NEVER;
      }
      return { percent };
    }),
  );
}

// A Go duration without a sign and with a non-zero digit somewhere; values too small to count
// (`0.0000001ns`) or too large for Go pass this pattern and are refused by the loader only.
const POSITIVE_DURATION_PATTERN =
  "^\\+?(?=[^1-9]*[1-9])(?:(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$";

/** A Go duration greater than zero, in milliseconds. */
export function duration() {
  return v.pipe(
    v.string(DURATION_HINT),
    jsonSchema({ pattern: POSITIVE_DURATION_PATTERN }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      let milliseconds: number;
      try {
        milliseconds = parseDuration(dataset.value);
      } catch (error) {
        addIssue({ message: `${DURATION_HINT} (${(error as Error).message})` });
        return NEVER;
      }
      if (milliseconds <= 0) {
        addIssue({ message: "must be greater than zero" });
        return NEVER;
      }
      return milliseconds;
    }),
  );
}

// A size with a unit and a non-zero digit; a fraction that is not a whole number of bytes
// (`1.5B`) or a size beyond 2^53 passes this pattern and is refused by the loader only.
const POSITIVE_SIZE_PATTERN = `^(?=[^1-9]*[1-9])\\d+(?:\\.\\d+)? ?(?:${SIZE_UNITS.join("|")})$`;

/** A size greater than zero, in bytes. */
export function size() {
  return v.pipe(
    v.string(SIZE_HINT),
    jsonSchema({ pattern: POSITIVE_SIZE_PATTERN }),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      let bytes: number;
      try {
        bytes = parseSize(dataset.value);
      } catch (error) {
        addIssue({ message: `${SIZE_HINT} (${(error as Error).message})` });
        return NEVER;
      }
      if (bytes === 0) {
        addIssue({ message: "must be greater than zero" });
        return NEVER;
      }
      return bytes;
    }),
  );
}

export function id() {
  return v.pipe(
    v.string("must be a string"),
    v.regex(
      ID_PATTERN,
      'must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit',
    ),
  );
}

export function secretName() {
  return v.pipe(
    v.string("must be a string"),
    v.regex(
      SECRET_NAME_PATTERN,
      "must be an environment variable name (letters, digits and _, not starting with a digit)",
    ),
  );
}

/** A glob over destination paths (see `compileGlob`); a malformed one is refused by its key. */
export function glob() {
  return v.pipe(
    v.string("must be a string"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const problem = globProblem(dataset.value);
      if (problem !== undefined) addIssue({ message: `must be a glob pattern: it ${problem}` });
    }),
    jsonSchema({ type: "string", minLength: 1 }),
  );
}

/** An HTTP header value: visible ASCII and spaces, not empty. */
export function headerValue() {
  return v.pipe(
    text(),
    v.regex(
      /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/,
      "must be an HTTP header value: visible ASCII characters and inner spaces",
    ),
  );
}

/** An absolute http(s) URL without user information (it ends up in state files and reports). */
export function httpUrl(options: { bare?: boolean } = {}) {
  const hint = "must be an absolute http or https URL";
  return v.pipe(
    v.string(hint),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const url = URL.canParse(dataset.value) ? new URL(dataset.value) : undefined;
      if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
        addIssue({ message: hint });
      } else if (url.username !== "" || url.password !== "") {
        addIssue({ message: "must not contain a user name or password" });
      } else if (options.bare === true && (url.search !== "" || url.hash !== "")) {
        addIssue({ message: "must not have a query or fragment" });
      }
    }),
    // Scheme and an authority without user information; the loader also parses the whole URL.
    jsonSchema({
      pattern:
        options.bare === true
          ? "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+(?:/[^?#]*)?$"
          : "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+(?:[/?#]\\S*)?$",
    }),
  );
}

/** `releases.preview_url`: an http(s) URL with `{release}` where a staged release's id goes. */
export function previewUrl() {
  return v.pipe(
    httpUrl(),
    v.check(
      (value) => value.includes("{release}"),
      "must contain {release}, where the id of the staged release goes",
    ),
    jsonSchema({ pattern: "\\{release\\}" }),
  );
}

/** `host:port` or `[ipv6]:port`; an empty host listens on every interface, port 0 on a free one. */
const LISTEN = /^(?:\[[0-9A-Fa-f:.]+\]|[^\s:[\]]*):(\d{1,5})$/;

export function listenAddress() {
  const hint = "must be host:port, such as 127.0.0.1:8080 or [::1]:8080";
  return v.pipe(
    v.string(hint),
    v.check((value) => {
      const port = LISTEN.exec(value)?.[1];
      return port !== undefined && Number(port) <= 65_535;
    }, hint),
    jsonSchema({
      pattern:
        "^(?:\\[[0-9A-Fa-f:.]+\\]|[^\\s:[\\]]*):0*(?:6553[0-5]|655[0-2]\\d|65[0-4]\\d{2}|6[0-4]\\d{3}|[1-5]\\d{4}|\\d{1,4})$",
    }),
  );
}

export function s3Prefix() {
  return v.pipe(
    v.string("must be a string"),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed || dataset.value === "") return;
      const problem = pathProblem(dataset.value);
      if (problem !== undefined) {
        addIssue({ message: `must be a clean relative path such as reports/daily (${problem})` });
      }
    }),
    // docs/design/bundles.md without the 255-byte segment limit: no leading, trailing or doubled /, no . or ..
    // segment, no backslash or control character.
    jsonSchema({
      pattern: "^(?!/)(?!.*//)(?!.*/$)(?!(?:.*/)?\\.\\.?(?:/|$))[^\\\\\\u0000-\\u001f\\u007f]*$",
    }),
  );
}

/** Keys that would put a secret value in the file; each points at the reference key to use. */
export function literalSecret(referenceKey: string, what: string) {
  return v.optional(
    v.never(
      `is not allowed: configuration files must not contain ${what}; store it in an environment ` +
        `variable or a file in secrets.directory and name it with ${referenceKey}`,
    ),
  );
}
