import { createHash } from "node:crypto";
import { TOKEN } from "./upload-api.js";

// tus 1.0 requests as a producer sends them, for the suites that drive resumable uploads over
// real HTTP (docs/integrations/http-upload.md, "Resumable uploads").

export const sha256Hex = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
const base64 = (text: string) => Buffer.from(text).toString("base64");

export async function createTus(
  url: string,
  body: Buffer,
  options: { key?: string; token?: string; length?: number; digest?: string } = {},
) {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${options.token ?? TOKEN}`,
    "Tus-Resumable": "1.0.0",
    "Upload-Length": String(options.length ?? body.length),
    "Upload-Metadata": `filetype ${base64("application/gzip")},sha256 ${base64(options.digest ?? sha256Hex(body))}`,
  };
  if (options.key !== undefined) headers["Idempotency-Key"] = options.key;
  return fetch(`${url}/pipelines/reports/uploads`, { method: "POST", headers });
}

export async function patchTus(
  url: string,
  location: string,
  offset: number,
  bytes: Buffer,
  extra: Record<string, string> = {},
  token = TOKEN,
) {
  return fetch(new URL(location, url), {
    method: "PATCH",
    headers: {
      Authorization: `Bearer ${token}`,
      "Tus-Resumable": "1.0.0",
      "Content-Type": "application/offset+octet-stream",
      "Upload-Offset": String(offset),
      ...extra,
    },
    body: new Uint8Array(bytes),
  });
}

export async function headTus(url: string, location: string, token = TOKEN) {
  return fetch(new URL(location, url), {
    method: "HEAD",
    headers: { Authorization: `Bearer ${token}`, "Tus-Resumable": "1.0.0" },
  });
}

export async function deleteTus(url: string, location: string, token = TOKEN) {
  return fetch(new URL(location, url), {
    method: "DELETE",
    headers: { Authorization: `Bearer ${token}`, "Tus-Resumable": "1.0.0" },
  });
}

export async function errorCode(response: Response): Promise<string | undefined> {
  const body = (await response.json()) as { error?: { code?: string } };
  return body.error?.code;
}

export async function metricsText(url: string, token = TOKEN): Promise<string> {
  return (await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${token}` } })).text();
}
