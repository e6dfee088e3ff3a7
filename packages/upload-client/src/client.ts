import { createReadStream } from "node:fs";
import {
  BUNDLE_ARCHIVE_CONTENT_TYPE,
  packBundle,
  signBundleManifest,
  validateBundleDirectory,
} from "@distributor/bundle";
import { waitForRun } from "./follow.js";
import { generateIdempotencyKey, idempotencyKeyProblem } from "./idempotency.js";
import {
  type ClientTimeouts,
  DEFAULT_TIMEOUTS,
  type UploadClient,
  type UploadClientOptions,
} from "./options.js";
import type { AcceptedUpload } from "./records.js";
import { packToFile, type ResumableUpload, resumableAttempt } from "./resumable.js";
import { retryPolicy, withRetries } from "./retry.js";
import {
  createDeadline,
  createTransport,
  invalidResponse,
  isAbort,
  pacedBody,
  readBody,
  refusal,
} from "./transport.js";
import {
  type AcceptedBody,
  AcceptedBodySchema,
  type CancelAnswer,
  CancelAnswerSchema,
  parseWire,
  RunPageSchema,
  RunRecordSchema,
} from "./wire.js";

/** How a local refusal names the upload's file limit. */
const UPLOAD_MAX_FILES = {
  name: "the upload's validation.maxFiles",
  raise:
    "raise validation.maxFiles of the upload up to as many files as the server's pipeline accepts",
} as const;

export function createUploadClient(options: UploadClientOptions): UploadClient {
  const server = baseUrl(options.server);
  if (typeof options.token !== "string" || options.token === "") {
    throw new TypeError("upload client token must be a non-empty string");
  }
  const clientPolicy = retryPolicy(options.retry);
  const timeouts: ClientTimeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  const { send, headers } = createTransport(options, timeouts);

  const singleRequest: SingleRequest = async (target, stream, answered) => {
    const { url, operation, idempotencyKey, signal } = target;
    let bodyError: unknown;
    stream.on("error", (error) => {
      bodyError ??= error;
    });
    const deadline = createDeadline(timeouts.connectMs);
    const body = pacedBody(stream, deadline, timeouts.requestMs);
    try {
      let response: Response;
      try {
        response = await send(
          url,
          {
            method: "POST",
            headers: headers({
              "content-type": BUNDLE_ARCHIVE_CONTENT_TYPE,
              "idempotency-key": idempotencyKey,
            }),
            body,
            duplex: "half",
            ...(signal === undefined ? {} : { signal }),
          } as RequestInit,
          operation,
          deadline,
        );
      } catch (error) {
        // The bundle changed while it was packed: not the connection's fault, not retried.
        if (bodyError !== undefined && !isAbort(bodyError)) throw bodyError;
        throw error;
      }
      if (response.status !== 200 && response.status !== 201 && response.status !== 202) {
        throw await refusal(response, operation);
      }
      const answer = await readBody(response, operation);
      deadline.clear();
      const accepted = parseWire(AcceptedBodySchema, answer);
      if (!accepted.ok) throw invalidResponse(operation, response, accepted.problem);
      return answered(response, accepted.value);
    } finally {
      deadline.clear();
      // An early answer (a refusal before the body was read) leaves files open otherwise.
      (stream as unknown as { destroy?: () => void }).destroy?.();
    }
  };

  const client: UploadClient = {
    server,

    async upload(bundleDirectory, uploadOptions) {
      const { pipeline, signal } = uploadOptions;
      if (typeof pipeline !== "string" || pipeline === "") {
        throw new TypeError("upload requires a pipeline id");
      }
      const idempotencyKey = uploadOptions.idempotencyKey ?? generateIdempotencyKey();
      const keyProblem = idempotencyKeyProblem(idempotencyKey);
      if (keyProblem !== undefined) throw new RangeError(keyProblem);
      const policy = retryPolicy(uploadOptions.retries, clientPolicy);
      signal?.throwIfAborted();
      if (uploadOptions.sign !== undefined) {
        await signBundleManifest(bundleDirectory, { ...uploadOptions.sign, signal });
      }

      // A broken bundle is the producer's to fix: say so before sending a byte. Its limits are
      // the producer's own settings, so a refusal names those, never the pipeline's.
      const validated = await validateBundleDirectory(bundleDirectory, {
        maxFilesSetting: UPLOAD_MAX_FILES,
        ...uploadOptions.validation,
        ...(signal === undefined ? {} : { signal }),
      });
      const maxFiles = uploadOptions.validation?.maxFiles;
      const url = new URL(`pipelines/${encodeURIComponent(pipeline)}/uploads`, server).href;
      const operation = `upload of ${validated.manifest.id} to ${url}`;

      const pack = () =>
        packBundle(bundleDirectory, {
          mtime: validated.manifest.created,
          ...(maxFiles === undefined ? {} : { maxFiles }),
          ...(signal === undefined ? {} : { signal }),
        });
      const answered = (response: Response, body: AcceptedBody): AcceptedUpload => ({
        ...body,
        status_url: new URL(body.status_url, server).href,
        replayed: response.headers.get("idempotency-replayed")?.toLowerCase() === "true",
        idempotency_key: idempotencyKey,
      });
      const target = { url, operation, idempotencyKey, signal };
      const resumable = uploadOptions.resumable ?? "auto";
      if (resumable === false) {
        return withRetries(policy, signal, uploadOptions.onRetry, async () => {
          // A consumed body cannot be sent again, so every attempt packs afresh.
          const packed = await pack();
          return singleRequest(target, packed.stream, answered);
        });
      }
      // Packed once, into a file: a resumed attempt sends its bytes from the offset the server
      // holds, and the size and digest are declared at creation.
      const archive = await packToFile((await pack()).stream);
      try {
        if (resumable === "auto" && archive.size < RESUMABLE_THRESHOLD_BYTES) {
          return await withRetries(policy, signal, uploadOptions.onRetry, () =>
            singleRequest(target, createReadStream(archive.path), answered),
          );
        }
        const state: ResumableUpload = {
          transport: { send, headers },
          timeouts,
          createUrl: url,
          server,
          archive,
          idempotencyKey,
          operation,
          signal,
          onProgress: uploadOptions.onProgress,
        };
        const done = await withRetries(policy, signal, uploadOptions.onRetry, async () => {
          const result = await resumableAttempt(state);
          if (result !== "unsupported") return answered(result.response, result.accepted);
          return undefined;
        });
        if (done !== undefined) return done;
        // A server that does not speak tus takes the archive in one request.
        return await withRetries(policy, signal, uploadOptions.onRetry, () =>
          singleRequest(target, createReadStream(archive.path), answered),
        );
      } finally {
        await archive.remove();
      }
    },

    async getRun(runId, getOptions = {}) {
      if (typeof runId !== "string" || runId === "")
        throw new TypeError("getRun requires a run id");
      const { signal } = getOptions;
      const policy = retryPolicy(getOptions.retries, clientPolicy);
      const waitMs = Math.max(0, Math.floor((getOptions.waitMs ?? 0) / 1000)) * 1000;
      const url = new URL(`runs/${encodeURIComponent(runId)}`, server);
      if (waitMs > 0) url.searchParams.set("wait", `${waitMs / 1000}s`);
      const operation = `status of run ${runId} from ${url.href}`;
      return withRetries(policy, signal, undefined, async () => {
        const deadline = createDeadline(timeouts.connectMs + timeouts.requestMs + waitMs);
        let answer: unknown;
        let response: Response;
        try {
          response = await send(
            url.href,
            { method: "GET", headers: headers(), ...(signal === undefined ? {} : { signal }) },
            operation,
            deadline,
          );
          if (response.status !== 200) {
            deadline.clear();
            throw await refusal(response, operation);
          }
          answer = await readBody(response, operation);
        } finally {
          // Cleared whatever happened: a server that restarted refuses the connection at once.
          deadline.clear();
        }
        const record = parseWire(RunRecordSchema, answer);
        if (!record.ok) throw invalidResponse(operation, response, record.problem);
        return record.value;
      });
    },

    async listRuns(listOptions = {}) {
      const { signal } = listOptions;
      const policy = retryPolicy(listOptions.retries, clientPolicy);
      const url = new URL("runs", server);
      if (listOptions.pipeline !== undefined)
        url.searchParams.set("pipeline", listOptions.pipeline);
      if (listOptions.status !== undefined) url.searchParams.set("status", listOptions.status);
      if (listOptions.limit !== undefined) url.searchParams.set("limit", String(listOptions.limit));
      if (listOptions.cursor !== undefined) url.searchParams.set("cursor", listOptions.cursor);
      const operation = `list of runs from ${url.href}`;
      return withRetries(policy, signal, undefined, async () => {
        const response = await send(
          url.href,
          { method: "GET", headers: headers(), ...(signal === undefined ? {} : { signal }) },
          operation,
        );
        if (response.status !== 200) throw await refusal(response, operation);
        const page = parseWire(RunPageSchema, await readBody(response, operation));
        if (!page.ok) throw invalidResponse(operation, response, page.problem);
        return page.value;
      });
    },

    async cancelRun(runId, cancelOptions = {}) {
      if (typeof runId !== "string" || runId === "")
        throw new TypeError("cancelRun requires a run id");
      const { signal } = cancelOptions;
      const url = new URL(`runs/${encodeURIComponent(runId)}/cancel`, server);
      const operation = `cancel of run ${runId} at ${url.href}`;
      const response = await send(
        url.href,
        { method: "POST", headers: headers(), ...(signal === undefined ? {} : { signal }) },
        operation,
      );
      if (response.status !== 200 && response.status !== 202) {
        throw await refusal(response, operation);
      }
      const answer = parseWire(CancelAnswerSchema, await readBody(response, operation));
      if (!answer.ok) throw invalidResponse(operation, response, answer.problem);
      const { cancel_requested, ...record }: CancelAnswer = answer.value;
      return { record, cancelRequested: cancel_requested === true };
    },

    waitForRun(runId, waitOptions = {}) {
      // Through the client object at each poll, as a method call would.
      return waitForRun((id, getOptions) => client.getRun(id, getOptions), runId, waitOptions);
    },
  };
  return client;
}

/** Archives this large or larger are sent resumably by default (`resumable: "auto"`). */
export const RESUMABLE_THRESHOLD_BYTES = 4 * 1024 * 1024;

/** The single-request upload: the whole archive as the body of one POST. */
type SingleRequest = (
  target: {
    url: string;
    operation: string;
    idempotencyKey: string;
    signal: AbortSignal | undefined;
  },
  stream: NodeJS.ReadableStream & AsyncIterable<Uint8Array>,
  answered: (response: Response, body: AcceptedBody) => AcceptedUpload,
) => Promise<AcceptedUpload>;

/** The server URL as a base for relative references: http(s), ending in `/`. */
function baseUrl(server: string | URL): URL {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new TypeError(
      `upload server must be an absolute http or https URL, got ${JSON.stringify(String(server))}`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(
      `upload server must be an http or https URL, got ${JSON.stringify(url.href)}`,
    );
  }
  if (url.search !== "" || url.hash !== "") {
    throw new TypeError(
      `upload server URL must have no query or fragment, got ${JSON.stringify(url.href)}`,
    );
  }
  if (!url.pathname.endsWith("/")) url.pathname = `${url.pathname}/`;
  return url;
}
