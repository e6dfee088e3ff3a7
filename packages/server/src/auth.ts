import { createHash, timingSafeEqual } from "node:crypto";
import { stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { join } from "node:path";
import type { Config, UploadTokenConfig } from "@distributor/publish";
import { WorkflowError } from "@distributor/publish";
import { resolveSecret } from "@distributor/storage";
import type { RequestLog } from "./context.js";
import { HttpError } from "./http-error.js";
import type { ResolvedToken } from "./token.js";

/**
 * Resolves every configured upload token at startup. A missing or empty secret fails with the
 * reference's name (never its value); two tokens with the same value fail too, since the server
 * could not tell which one's permissions apply.
 */
export async function resolveUploadTokens(
  config: Config,
  options: {
    env?: NodeJS.ProcessEnv;
    signal?: AbortSignal;
    /** Told about a token file that group or others may read (it is used all the same). */
    onWarning?: (message: string) => void;
  } = {},
): Promise<ResolvedToken[]> {
  const resolved: ResolvedToken[] = [];
  for (const [index, token] of config.uploadTokens.entries()) {
    const value = await resolveSecret(token.tokenEnv, {
      secretsDirectory: config.secrets.directory,
      ...(options.env ? { env: options.env } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    }).catch((error: unknown) => {
      throw new WorkflowError(
        "token_unavailable",
        `upload_tokens[${index}] (id ${token.id}): ${(error as Error).message}`,
        { cause: error },
      );
    });
    if (value.trim() === "") {
      throw new WorkflowError(
        "token_unavailable",
        `upload_tokens[${index}] (id ${token.id}): secret ${token.tokenEnv} holds only whitespace`,
      );
    }
    await warnIfShared(config, token.tokenEnv, options, (problem) =>
      options.onWarning?.(`upload_tokens[${index}] (id ${token.id}): ${problem}`),
    );
    const digest = tokenDigest(value);
    const twin = resolved.findIndex((other) => timingSafeEqual(other.digest, digest));
    if (twin >= 0) {
      throw new WorkflowError(
        "duplicate_token",
        `upload_tokens[${index}] (id ${token.id}) has the same value as upload_tokens[${twin}] (id ${config.uploadTokens[twin]?.id}); every token needs its own value`,
      );
    }
    resolved.push(resolvedToken(token, digest));
  }
  return resolved;
}

/**
 * A token file that group or others may read is warned about, not refused: mounted Docker and
 * Kubernetes secrets are often 0444 or 0644 in a container where no other user exists, while on a
 * shared host the warning says what to fix (see docs/operations.md).
 */
async function warnIfShared(
  config: Config,
  name: string,
  options: { env?: NodeJS.ProcessEnv },
  warn: (problem: string) => void,
): Promise<void> {
  const fromEnv = (options.env ?? process.env)[name];
  if ((fromEnv !== undefined && fromEnv !== "") || config.secrets.directory === undefined) return;
  const file = join(config.secrets.directory, name);
  const stats = await stat(file).catch(() => undefined);
  if (stats === undefined || (stats.mode & 0o044) === 0) return;
  warn(
    `secret file ${file} may be read by other users (mode ${(stats.mode & 0o777).toString(8)}); chmod 600 it`,
  );
}

function resolvedToken(token: UploadTokenConfig, digest: Buffer): ResolvedToken {
  return { id: token.id, allowPipelines: new Set(token.allowPipelines), digest };
}

function tokenDigest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

const BEARER = /^Bearer +([^\s]+) *$/i;

/**
 * The token an `Authorization: Bearer …` header presents, or undefined. Every token is compared,
 * each in constant time, so the answer's timing says nothing about which one nearly matched.
 */
export function authenticate(
  tokens: readonly ResolvedToken[],
  header: string | undefined,
): ResolvedToken | "missing" | "invalid" {
  if (header === undefined || header === "") return "missing";
  const match = BEARER.exec(header);
  if (match?.[1] === undefined) return "invalid";
  const digest = tokenDigest(match[1]);
  let found: ResolvedToken | undefined;
  for (const token of tokens) {
    if (timingSafeEqual(token.digest, digest) && found === undefined) found = token;
  }
  return found ?? "invalid";
}

/** The request's token, recorded in its log line; 401 with `WWW-Authenticate` without one. */
export function authorize(
  tokens: readonly ResolvedToken[],
  request: IncomingMessage,
  log: Pick<RequestLog, "token_id">,
): ResolvedToken {
  const token = authenticate(tokens, request.headers.authorization);
  if (typeof token === "string") {
    throw new HttpError(
      401,
      "unauthorized",
      token === "missing"
        ? "an Authorization: Bearer <token> header is required"
        : "the bearer token is not valid",
      { headers: { "WWW-Authenticate": 'Bearer realm="distributor"' } },
    );
  }
  log.token_id = token.id;
  return token;
}
