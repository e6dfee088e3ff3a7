import { describe, expect, it } from "vitest";
import {
  AcceptedBodySchema,
  CancelAnswerSchema,
  ErrorBodySchema,
  parseWire,
  RunPageSchema,
  RunRecordSchema,
} from "../src/wire.js";

// The wire schemas alone: what they accept and how they name what is wrong. The server's answers
// are checked against them in the server's own suites.

const manifest = { id: "reports.x", digest: "sha256:ab", created: "2026-06-04T11:55:00Z" };
const record = {
  run_id: "r1",
  pipeline_id: "reports",
  status: "succeeded",
  accepted_at: "2026-06-04T12:00:00.000Z",
  started_at: "2026-06-04T12:00:01.000Z",
  finished_at: "2026-06-04T12:00:02.000Z",
  manifest,
  result: {
    counts: { published: 1 },
    actions: [
      {
        destination_id: "site",
        bundle_path: "reports/x",
        action: "publish",
        status: "published",
        primary_url: null,
        outputs: 2,
        error: null,
      },
    ],
    pipeline_errors: [],
    interrupted: false,
  },
  error: null,
};

describe("wire schemas", () => {
  it("accept the records of docs/integrations/http-upload.md and drop fields they do not know", () => {
    const parsed = parseWire(RunRecordSchema, { ...record, added_later: 1 });
    expect(parsed).toEqual({ ok: true, value: record });
    expect(parseWire(RunPageSchema, { runs: [record], next_cursor: null }).ok).toBe(true);
    expect(parseWire(CancelAnswerSchema, { ...record, cancel_requested: true }).ok).toBe(true);
    expect(
      parseWire(ErrorBodySchema, { error: { code: "unauthorized", message: "no token" } }),
    ).toEqual({ ok: true, value: { error: { code: "unauthorized", message: "no token" } } });
  });

  it("keep a staged action's release id and preview URL", () => {
    const staged = {
      ...record,
      result: {
        ...record.result,
        counts: { staged: 1 },
        actions: [
          {
            ...record.result.actions[0],
            status: "staged",
            release_id: "20261204T094633.369Z-9975",
            preview_url: "https://preview.example.org/20261204T094633.369Z-9975/",
          },
        ],
      },
    };
    expect(parseWire(RunRecordSchema, staged)).toEqual({ ok: true, value: staged });
  });

  it("name the first field that is wrong, nested ones by their path", () => {
    const problem = (schema: Parameters<typeof parseWire>[0], body: unknown) => {
      const parsed = parseWire(schema, body);
      return parsed.ok ? "ok" : parsed.problem;
    };
    expect(problem(RunRecordSchema, "ok")).toBe('body must be an object, got "ok"');
    expect(problem(RunRecordSchema, { ...record, status: "done" })).toBe(
      'status must be "accepted" or "queued" or "running" or "succeeded" or "failed", got "done"',
    );
    expect(problem(RunRecordSchema, { ...record, manifest: { ...manifest, digest: 7 } })).toBe(
      "manifest.digest must be a string, got 7",
    );
    expect(problem(RunRecordSchema, { ...record, finished_at: undefined })).toBe(
      "finished_at is missing",
    );
    expect(problem(RunRecordSchema, { ...record, error: { code: "", message: "m" } })).toBe(
      "error.code must not be empty",
    );
    expect(
      problem(RunPageSchema, {
        runs: [{ ...record, result: { ...record.result, interrupted: "no" } }],
        next_cursor: null,
      }),
    ).toBe('runs.0.result.interrupted must be a boolean, got "no"');
    expect(problem(AcceptedBodySchema, { ...record, status_url: "" })).toBe(
      "status_url must not be empty",
    );
  });
});
