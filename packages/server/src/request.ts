import { HttpError } from "./http-error.js";

/** Refuses a request whose method the endpoint does not take (405, with `Allow`). */
export function allow(method: string, allowed: string) {
  if (method !== allowed) {
    throw new HttpError(405, "method_not_allowed", `use ${allowed} here, not ${method}`, {
      headers: { Allow: allowed },
    });
  }
}

/** The request target without its query. */
export function pathOf(url: string | undefined): string {
  const raw = url ?? "/";
  const query = raw.indexOf("?");
  return query < 0 ? raw : raw.slice(0, query);
}

export function queryOf(url: string | undefined): URLSearchParams {
  const raw = url ?? "/";
  const query = raw.indexOf("?");
  return new URLSearchParams(query < 0 ? "" : raw.slice(query + 1));
}

export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, "bad_request", `malformed path segment ${JSON.stringify(segment)}`);
  }
}
