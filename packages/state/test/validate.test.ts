import {
  assertSingleOwnerScope,
  formatOwnerScope,
  ownerScope,
  type SharedRootState,
  type SingleOwnerState,
  StateError,
  sameOwnerScope,
  sharedRootProblem,
  singleOwnerProblem,
  singleOwnerScope,
  validateSharedRootState,
  validateSingleOwnerState,
  validateState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { validSharedRootState, validSingleOwnerState } from "./helpers.js";

type Loose = Record<string, unknown>;

describe("validateSingleOwnerState (in-memory values)", () => {
  it("accepts parsed state", () => {
    expect(() => validateSingleOwnerState(validSingleOwnerState())).not.toThrow();
    expect(singleOwnerProblem(validSingleOwnerState())).toBeUndefined();
  });

  it("reports the first problem of each kind", () => {
    const cases: [string, (state: SingleOwnerState) => void, string][] = [
      [
        "schema",
        (s) => ((s as unknown as Loose).schemaVersion = 1),
        "state schema_version must be 2",
      ],
      [
        "version",
        (s) => ((s as unknown as Loose).distributorVersion = { major: 1 }),
        "state distributor_version must be a string",
      ],
      ["pipeline", (s) => (s.pipelineId = ""), "state pipeline_id is required"],
      [
        "state file as output",
        (s) => {
          const [first] = s.outputs;
          if (first) first.path = ".distributor.json";
        },
        "state outputs[0].path must not be .distributor.json",
      ],
      ["destination", (s) => (s.destinationId = ""), "state destination_id is required"],
      [
        "published",
        (s) => ((s as unknown as Loose).publishedAt = undefined),
        "state published_at is required",
      ],
      [
        "created",
        (s) => ((s as unknown as Loose).createdAt = undefined),
        "state created_at is required",
      ],
      [
        "updated invalid",
        (s) => (s.updatedAt = new Date(Number.NaN)),
        "state updated_at must be a valid date",
      ],
      [
        "year 10000",
        (s) => (s.updatedAt = new Date("+010000-01-01T00:00:00Z")),
        "state updated_at must be a valid date",
      ],
      [
        "state mode",
        (s) => ((s.state as unknown as Loose).mode = "shared_root"),
        "state state.mode must be single_owner",
      ],
      [
        "reconciliation",
        (s) => ((s.reconciliation as unknown as Loose).mode = "mirror"),
        "state reconciliation.mode must be replace or merge",
      ],
      [
        "manifest digest",
        (s) => (s.source.manifest = { ...s.source.manifest, digest: `sha256:${"0".repeat(64)}` }),
        "state source.manifest: digest does not match",
      ],
      [
        "manifest created",
        (s) => (s.source.manifest = { ...s.source.manifest, created: new Date(Number.NaN) }),
        "state source.manifest:",
      ],
      [
        // The parsed manifest itself, changed after parsing: checked again, not trusted.
        "manifest changed in place",
        (s) => (s.source.manifest.files[0]!.size = -1),
        "state source.manifest: files[0].size must be a non-negative integer",
      ],
      [
        "link",
        (s) => (s.links = { primaryUrl: "javascript:alert(1)" }),
        "state links.primary_url:",
      ],
      [
        "outputs",
        (s) => ((s as unknown as Loose).outputs = undefined),
        "state outputs is required",
      ],
      [
        "output created",
        (s) => ((s.outputs[0] as unknown as Loose).createdAt = undefined),
        "state outputs[0].created_at is required",
      ],
      [
        "output updated",
        (s) => ((s.outputs[1] as unknown as Loose).updatedAt = undefined),
        "state outputs[1].updated_at is required",
      ],
      [
        "output size",
        (s) => (s.outputs[0]!.size = 1.5),
        "state outputs[0].size must be an integer",
      ],
      [
        "output kind",
        (s) => ((s.outputs[0] as unknown as Loose).kind = "other"),
        "state outputs[0].kind must be source or generated",
      ],
      ["output path", (s) => (s.outputs[0]!.path = "a//b"), "state outputs[0].path:"],
      [
        "output transform",
        (s) => (s.outputs[1]!.transform = ""),
        "state outputs[1].transform is required for generated output",
      ],
      [
        "duplicate",
        (s) => (s.outputs[1]!.path = "report.md"),
        'state outputs[1].path duplicates "report.md"',
      ],
    ];
    for (const [name, mutate, fragment] of cases) {
      const state = validSingleOwnerState();
      mutate(state);
      expect(() => validateSingleOwnerState(state), name).toThrow(fragment);
      expect(() => validateState(state), name).toThrow(StateError);
      expect(singleOwnerProblem(state), name).toContain(fragment);
    }
  });
});

describe("validateSharedRootState (in-memory values)", () => {
  it("accepts parsed state", () => {
    expect(() => validateSharedRootState(validSharedRootState())).not.toThrow();
    expect(() => validateState(validSharedRootState())).not.toThrow();
  });

  it("reports owner and output problems", () => {
    const cases: [string, (state: SharedRootState) => void, string][] = [
      [
        "schema",
        (s) => ((s as unknown as Loose).schemaVersion = 2),
        "state schema_version must be 3",
      ],
      [
        "created",
        (s) => ((s as unknown as Loose).createdAt = undefined),
        "state created_at is required",
      ],
      [
        "version",
        (s) => ((s as unknown as Loose).distributorVersion = 2),
        "state distributor_version must be a string",
      ],
      ["owners", (s) => ((s as unknown as Loose).owners = undefined), "state owners is required"],
      [
        "owner pipeline",
        (s) => (s.owners[0]!.scope = ownerScope("", "archive")),
        "state owners[0].pipeline_id is required",
      ],
      [
        "duplicate owner",
        (s) => s.owners.push(s.owners[1]!),
        "state owners[2] duplicates owner reports/html",
      ],
      [
        "unknown owner",
        (s) => (s.outputs[0]!.owner = ownerScope("reports", "gone")),
        "state outputs[0] references unknown owner reports/gone",
      ],
      ["source id", (s) => (s.outputs[0]!.sourceId = ""), "state outputs[0].source_id is required"],
      [
        "source created",
        (s) => ((s.outputs[0] as unknown as Loose).sourceCreated = undefined),
        "state outputs[0].source_created is required",
      ],
      [
        "output updated",
        (s) => ((s.outputs[0] as unknown as Loose).updatedAt = undefined),
        "state outputs[0].updated_at is required",
      ],
    ];
    for (const [name, mutate, fragment] of cases) {
      const state = validSharedRootState();
      mutate(state);
      expect(() => validateSharedRootState(state), name).toThrow(fragment);
      expect(sharedRootProblem(state), name).toContain(fragment);
    }
  });
});

describe("owner scopes", () => {
  it("assertSingleOwnerScope: state owner is A/B, not C/D", () => {
    const state = validSingleOwnerState();
    expect(() => assertSingleOwnerScope(state, ownerScope("reports", "archive"))).not.toThrow();
    expect(() => assertSingleOwnerScope(state, ownerScope("reports", "html"))).toThrow(
      "state owner is reports/archive, not reports/html",
    );
    expect(() => assertSingleOwnerScope(state, ownerScope("news", "archive"))).toThrow(StateError);
  });

  it("formats and compares scopes", () => {
    expect(formatOwnerScope(ownerScope("a", "b"))).toBe("a/b");
    expect(sameOwnerScope(ownerScope("a", "b"), { pipelineId: "a", destinationId: "b" })).toBe(
      true,
    );
    expect(sameOwnerScope(ownerScope("a", "b"), ownerScope("a", "c"))).toBe(false);
    expect(singleOwnerScope(validSingleOwnerState())).toEqual(ownerScope("reports", "archive"));
  });
});
