import { buildManifest, type Manifest } from "@distributor/bundle";
import {
  findOwner,
  mergeOwnerOutputs,
  type OutputKind,
  type OwnerRecord,
  type OwnerScope,
  ownerOutputs,
  parseDocument,
  parseSharedRootState,
  parseSingleOwnerState,
  planPrune,
  projectOwnerOutputs,
  replaceOwnerOutputs,
  type SharedRootState,
  type SingleOwnerState,
  sameOwnerScope,
  serializeSharedRootState,
  serializeSingleOwnerState,
  sharedRootPruneCandidates,
} from "@distributor/state";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

// Second-precision instants across the whole RFC 3339 range (years 0000-9999).
const MIN_SECOND = -62_167_219_200;
const MAX_SECOND = 253_402_300_799;
const timestamp = fc.integer({ min: MIN_SECOND, max: MAX_SECOND }).map((s) => new Date(s * 1000));

const digest = fc.stringMatching(/^[0-9a-f]{64}$/).map((hex) => `sha256:${hex}`);
const id = fc.string({ minLength: 1, maxLength: 12 });
// Directory names have no dot and file names always do, so no file is another file's directory.
const logicalPath = fc
  .tuple(
    fc.option(fc.stringMatching(/^[a-z]{1,6}$/), { nil: undefined }),
    fc.stringMatching(/^[a-z0-9_-]{1,8}\.(md|txt|html)$/),
  )
  .map(([dir, file]) => (dir === undefined ? file : `${dir}/${file}`));
const httpUrl = fc
  .tuple(fc.constantFrom("http", "https"), fc.stringMatching(/^[a-z]{1,8}$/), logicalPath)
  .map(([scheme, host, path]) => `${scheme}://${host}.example/${path}`);
const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined });

const manifest: fc.Arbitrary<Manifest> = fc
  .record({
    id: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/),
    created: timestamp,
    files: fc.uniqueArray(
      fc.record({ path: logicalPath, sha256: digest, size: fc.nat({ max: 1_000_000 }) }),
      { minLength: 1, maxLength: 4, selector: (file) => file.path },
    ),
  })
  .map((draft) => buildManifest(draft));

interface OutputFields {
  path: string;
  kind: OutputKind;
  sourcePath: string;
  transform?: string;
  url?: string;
  sha256: string;
  size: number;
  createdAt: Date;
  updatedAt: Date;
}

const outputFields: fc.Arbitrary<OutputFields> = fc
  .record({
    path: logicalPath,
    kind: fc.constantFrom<OutputKind>("source", "generated"),
    sourcePath: logicalPath,
    transform: optional(fc.stringMatching(/^[a-z_]{1,16}$/)),
    url: optional(httpUrl),
    sha256: digest,
    size: fc.maxSafeNat(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .map((output) => {
    const fields: OutputFields = { ...output };
    // Generated outputs always record a transform; absent optionals are absent keys.
    if (fields.kind === "generated" && fields.transform === undefined)
      fields.transform = "markdown_to_html";
    if (fields.transform === undefined) delete fields.transform;
    if (fields.url === undefined) delete fields.url;
    return fields;
  });

const links = optional(httpUrl.map((primaryUrl) => ({ primaryUrl })));

const singleOwnerState: fc.Arbitrary<SingleOwnerState> = fc
  .record({
    distributorVersion: optional(fc.string({ minLength: 1, maxLength: 10 })),
    pipelineId: id,
    destinationId: id,
    publishedAt: timestamp,
    createdAt: timestamp,
    updatedAt: timestamp,
    reconciliation: fc.constantFrom("replace" as const, "merge" as const),
    manifest,
    links,
    outputs: fc.uniqueArray(outputFields, { maxLength: 5, selector: (output) => output.path }),
  })
  .map((draft) => {
    const state: SingleOwnerState = {
      schemaVersion: 2,
      pipelineId: draft.pipelineId,
      destinationId: draft.destinationId,
      publishedAt: draft.publishedAt,
      createdAt: draft.createdAt,
      updatedAt: draft.updatedAt,
      state: { mode: "single_owner" },
      reconciliation: { mode: draft.reconciliation },
      source: { manifest: draft.manifest },
      outputs: draft.outputs,
    };
    if (draft.distributorVersion !== undefined) state.distributorVersion = draft.distributorVersion;
    if (draft.links !== undefined) state.links = draft.links;
    return state;
  });

const ownerRecord: fc.Arbitrary<OwnerRecord> = fc
  .record({
    pipelineId: id,
    destinationId: id,
    reconciliation: fc.constantFrom("replace" as const, "merge" as const),
    manifest,
    links,
  })
  .map((draft) => {
    const owner: OwnerRecord = {
      scope: { pipelineId: draft.pipelineId, destinationId: draft.destinationId },
      reconciliation: { mode: draft.reconciliation },
      source: { manifest: draft.manifest },
    };
    if (draft.links !== undefined) owner.links = draft.links;
    return owner;
  });

const ownerKey = (scope: OwnerScope) => JSON.stringify([scope.pipelineId, scope.destinationId]);

const sharedRootState: fc.Arbitrary<SharedRootState> = fc
  .uniqueArray(ownerRecord, {
    minLength: 1,
    maxLength: 4,
    selector: (owner) => ownerKey(owner.scope),
  })
  .chain((owners) =>
    fc.record({
      distributorVersion: optional(fc.string({ minLength: 1, maxLength: 10 })),
      createdAt: timestamp,
      updatedAt: timestamp,
      owners: fc.constant(owners),
      outputs: fc.uniqueArray(
        fc.record({
          fields: outputFields,
          owner: fc.constantFrom(...owners),
          sourceId: id,
          sourceDigest: digest,
          sourceCreated: timestamp,
        }),
        { maxLength: 8, selector: (output) => output.fields.path },
      ),
    }),
  )
  .map((draft) => {
    const state: SharedRootState = {
      schemaVersion: 3,
      createdAt: draft.createdAt,
      updatedAt: draft.updatedAt,
      state: { mode: "shared_root" },
      owners: draft.owners,
      outputs: draft.outputs.map((output) => ({
        ...output.fields,
        owner: { ...output.owner.scope },
        sourceId: output.sourceId,
        sourceDigest: output.sourceDigest,
        sourceCreated: output.sourceCreated,
      })),
    };
    if (draft.distributorVersion !== undefined) state.distributorVersion = draft.distributorVersion;
    return state;
  });

describe("round trips", () => {
  it("serialise then parse returns an equal schema 2 state", () => {
    fc.assert(
      fc.property(singleOwnerState, (state) => {
        const text = serializeSingleOwnerState(state);
        expect(parseSingleOwnerState(text)).toEqual(state);
        expect(parseDocument(text)).toEqual(state);
        // Canonical: writing the parsed state again gives the same bytes.
        expect(serializeSingleOwnerState(parseSingleOwnerState(text))).toBe(text);
        // The text is written piece by piece; it must be what JSON.stringify renders.
        expect(text).toBe(`${JSON.stringify(JSON.parse(text))}\n`);
      }),
      { numRuns: 150 },
    );
  });

  it("serialise then parse returns an equal schema 3 state", () => {
    fc.assert(
      fc.property(sharedRootState, (state) => {
        const text = serializeSharedRootState(state);
        expect(parseSharedRootState(text)).toEqual(state);
        expect(parseDocument(text)).toEqual(state);
        expect(serializeSharedRootState(parseSharedRootState(text))).toBe(text);
        expect(text).toBe(`${JSON.stringify(JSON.parse(text))}\n`);
      }),
      { numRuns: 150 },
    );
  });
});

/** A shared-root state, one of its owners (or a new one), and planned outputs for that owner. */
const ownerPublication = sharedRootState.chain((state) =>
  fc.record({
    state: fc.constant(state),
    owner: fc.oneof(fc.constantFrom(...state.owners), ownerRecord),
    planned: fc.uniqueArray(outputFields, { maxLength: 5, selector: (output) => output.path }),
    now: timestamp,
  }),
);

describe("owner updates", () => {
  it("merge and replace of one owner never change another owner's record or outputs", () => {
    fc.assert(
      fc.property(ownerPublication, ({ state, owner, planned, now }) => {
        const before = structuredClone(state);
        const records = projectOwnerOutputs(
          planned,
          state.outputs,
          owner.scope,
          owner.source.manifest,
          now,
        );
        const others = state.owners.filter((o) => !sameOwnerScope(o.scope, owner.scope));
        const conflict = records.some((record) =>
          state.outputs.some(
            (o) => o.path === record.path && !sameOwnerScope(o.owner, owner.scope),
          ),
        );
        for (const apply of [mergeOwnerOutputs, replaceOwnerOutputs]) {
          if (conflict) {
            expect(() => apply(state, owner, records)).toThrow("is owned by");
            continue;
          }
          const next = apply(state, owner, records);
          for (const other of others) {
            expect(findOwner(next, other.scope)).toEqual(other);
            expect(ownerOutputs(next, other.scope)).toEqual(ownerOutputs(state, other.scope));
          }
          expect(findOwner(next, owner.scope)).toEqual(owner);
          expect(next.owners).toHaveLength(others.length + 1);
          expect(next.createdAt).toEqual(state.createdAt);
          for (const record of records) {
            expect(next.outputs.find((o) => o.path === record.path)).toEqual(record);
          }
          if (apply === replaceOwnerOutputs) {
            expect(ownerOutputs(next, owner.scope)).toEqual(records);
          }
        }
        expect(state).toEqual(before);
      }),
      { numRuns: 200 },
    );
  });
});

describe("planPrune", () => {
  const candidates = fc.uniqueArray(
    fc.record({
      path: logicalPath,
      updatedAt: fc.integer({ min: 0, max: 50 }).map((h) => new Date(h * 3_600_000)),
    }),
    { maxLength: 12, selector: (candidate) => candidate.path },
  );
  const options = fc.record({
    olderThanMs: optional(fc.integer({ min: 0, max: 60 }).map((h) => h * 3_600_000)),
    keepLatest: optional(fc.integer({ min: -1, max: 14 })),
  });
  const now = new Date(40 * 3_600_000);

  it("partitions the candidates: disjoint, complete, ordered", () => {
    fc.assert(
      fc.property(candidates, options, (list, policy) => {
        const plan = planPrune(list, { ...policy, now });
        const pruned = plan.pruned.map((c) => c.path);
        const preserved = plan.preserved.map((c) => c.path);
        expect(new Set([...pruned, ...preserved]).size).toBe(list.length);
        expect(pruned.length + preserved.length).toBe(list.length);
        expect([...pruned, ...preserved].sort()).toEqual(list.map((c) => c.path).sort());
        const times = (cs: typeof list) => cs.map((c) => c.updatedAt.getTime());
        expect(times(plan.pruned)).toEqual([...times(plan.pruned)].sort((a, b) => a - b));
        expect(times(plan.preserved)).toEqual([...times(plan.preserved)].sort((a, b) => b - a));
      }),
    );
  });

  it("always preserves the keep_latest newest", () => {
    fc.assert(
      fc.property(candidates, options, (list, policy) => {
        const plan = planPrune(list, { ...policy, now });
        if (policy.keepLatest === undefined) return;
        const keep = Math.min(Math.max(policy.keepLatest, 0), list.length);
        expect(plan.preserved.length).toBeGreaterThanOrEqual(keep);
        if (keep === 0) return;
        // Everything strictly newer than the keep-th newest time must survive, whatever the age.
        const newestTimes = list.map((c) => c.updatedAt.getTime()).sort((a, b) => b - a);
        const threshold = newestTimes[keep - 1]!;
        for (const candidate of plan.pruned) {
          expect(candidate.updatedAt.getTime()).toBeLessThanOrEqual(threshold);
        }
        const atThreshold = list.filter((c) => c.updatedAt.getTime() >= threshold).length;
        const preservedAtThreshold = plan.preserved.filter(
          (c) => c.updatedAt.getTime() >= threshold,
        ).length;
        expect(preservedAtThreshold).toBeGreaterThanOrEqual(Math.min(keep, atThreshold));
      }),
    );
  });

  it("never offers or prunes another owner's output", () => {
    fc.assert(
      fc.property(
        sharedRootState.chain((state) =>
          fc.tuple(fc.constant(state), fc.constantFrom(...state.owners), options),
        ),
        ([state, owner, policy]) => {
          const plan = planPrune(sharedRootPruneCandidates(state, owner.scope), { ...policy, now });
          const owned = new Set(ownerOutputs(state, owner.scope).map((o) => o.path));
          for (const candidate of [...plan.pruned, ...plan.preserved]) {
            expect(owned.has(candidate.path)).toBe(true);
            expect(candidate.owner).toEqual(owner.scope);
          }
          expect(plan.pruned.length + plan.preserved.length).toBe(owned.size);
        },
      ),
      { numRuns: 100 },
    );
  });
});
