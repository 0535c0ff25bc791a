// Which of a partition's incarnations and generations in the bucket is the partition, decided by
// evidence and never by date: the objects under the partition's key root, and the manifests
// beside them (meta/…), each saying which agent wrote it and whether its owner retired it. A
// generation is not a candidate when its owner retired it (a tombstone), or when its manifest was
// written by an agent that never owned this key space. What remains are the candidates; when
// more than one remains, the caller decides with more evidence (the broker's bytes, at boot) or
// lists them and stops (restore), unless the operator names one.
import { listBounded, type ListingOptions } from "../../providers/listing.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import type { KeySpace } from "../layout/key_space.ts";
import { decodeManifest, type Manifest, ManifestError } from "../layout/manifest.ts";
import { partitionRoot } from "../layout/object_keys.ts";
import { incarnationHex, type PartitionId } from "../layout/partition.ts";
import {
  byIncarnationThenGeneration,
  listRemoteGenerations,
  type RemoteGeneration,
} from "./remote_inventory.ts";
import { forEachBounded } from "../base/concurrency.ts";

/** One incarnation and generation the bucket holds for a partition. */
export interface Candidate {
  incarnation: bigint;
  generation: bigint;
  /** Its objects (possibly none: a manifest whose objects are all gone). */
  objects: RemoteGeneration;
  manifest?: Manifest;
  /** Why its manifest could not be read, when it has one that cannot. */
  manifestProblem?: string;
}

/** A generation that is not a candidate, and why. */
export interface Excluded {
  candidate: Candidate;
  reason: string;
}

/** What the bucket holds for one partition, sorted into candidates and the rest. */
export interface CandidateSet {
  eligible: Candidate[];
  excluded: Excluded[];
}

/** Manifests fetched at once. */
const MANIFEST_CONCURRENCY = 8;
/** A partition with more incarnations and generations than this in the bucket is suspect. */
const MAX_GENERATIONS = 10_000;

/** `{prefix}/{cluster}/meta/{s}/{t}/{p}/`: where a partition's manifests live. */
export function manifestRoot(ks: KeySpace, id: PartitionId): string {
  const root = partitionRoot({ ...ks, ...id });
  const cluster = partitionRoot({ ...ks, stream: 0, topic: 0, partition: 0 }).slice(
    0,
    -"0/0/0/".length,
  );
  return `${cluster}meta/${root.slice(cluster.length)}`;
}

/**
 * Lists what the bucket holds for partition `id`: its objects and manifests, by incarnation and
 * generation, split into candidates and excluded ones.
 * @param options.lineage the agents whose manifests are this key space's (undefined: any)
 * @param options.listing bounds and progress of the two listings
 * @throws {StoreError} when the store fails, or a listing is endless (providers/listing.ts)
 */
export async function findCandidates(
  store: ObjectStore,
  ks: KeySpace,
  id: PartitionId,
  options: { lineage?: ReadonlySet<string>; listing?: ListingOptions; signal?: AbortSignal } = {},
): Promise<CandidateSet> {
  const root = partitionRoot({ ...ks, ...id });
  const listing = { ...options.listing, signal: options.signal };
  const gens = await listRemoteGenerations(store, root, listing);
  const byDir = new Map<string, Candidate>();
  const dirOf = (incarnation: bigint, generation: bigint) =>
    `${incarnationHex(incarnation)}-${generation}`;
  for (const g of gens) {
    byDir.set(dirOf(g.incarnation, g.generation), {
      incarnation: g.incarnation,
      generation: g.generation,
      objects: g,
    });
  }
  const metaRoot = manifestRoot(ks, id);
  const manifests = new Map<string, string>();
  for (const o of await listBounded(store, metaRoot, listing)) {
    const m = /^([0-9a-f]{16})-(0|[1-9][0-9]{0,19})\/manifest\.json$/.exec(
      o.key.slice(metaRoot.length),
    );
    if (m) manifests.set(`${m[1]}-${m[2]}`, o.key);
  }
  if (byDir.size + manifests.size > MAX_GENERATIONS) {
    throw new StoreError(
      "Malformed",
      `${root}: more than ${MAX_GENERATIONS} incarnations and generations under one partition`,
      { op: "list", key: root },
    );
  }
  await forEachBounded([...manifests], MANIFEST_CONCURRENCY, async ([dir, key]) => {
    const [hex, gen] = dir.split("-");
    const incarnation = BigInt("0x" + hex);
    const generation = BigInt(gen);
    let c = byDir.get(dir);
    if (!c) {
      c = {
        incarnation,
        generation,
        objects: { incarnation, generation, logs: new Map(), indexes: new Map() },
      };
      byDir.set(dir, c);
    }
    try {
      const got = await store.get(key, { signal: options.signal });
      c.manifest = decodeManifest(key, got.bytes);
    } catch (err) {
      if (err instanceof StoreError && err.kind === "NotFound") return; // swept meanwhile
      if (!(err instanceof ManifestError)) throw err;
      c.manifestProblem = err.message;
    }
  });
  const eligible: Candidate[] = [];
  const excluded: Excluded[] = [];
  const lineage = options.lineage;
  const sorted = [...byDir.values()].sort(byIncarnationThenGeneration);
  for (const c of sorted) {
    const m = c.manifest;
    const foreign = m?.owner !== undefined && lineage !== undefined && !lineage.has(m.owner);
    if (foreign) {
      excluded.push({
        candidate: c,
        reason: `its manifest was written by agent ${m!.owner}, never an owner of this key space`,
      });
    } else if (m?.retired) {
      excluded.push({
        candidate: c,
        reason: `retired by its owner at ${new Date(m.retired.at).toISOString()} (${
          m.retired.reason || "no reason given"
        }); left for the sweep`,
      });
    } else if (c.objects.logs.size === 0 && c.objects.indexes.size === 0 && !m?.segments.length) {
      excluded.push({ candidate: c, reason: "a manifest that lists no segment, and no object" });
    } else eligible.push(c);
  }
  return { eligible, excluded };
}

/** A candidate in words: its objects, offsets, manifest and newest object. */
export function describeCandidate(c: Candidate): string {
  const starts = [...c.objects.logs.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const parts = [
    `incarnation ${incarnationHex(c.incarnation)} generation ${c.generation}`,
    `${starts.length} segment object(s)` +
    (starts.length > 0 ? ` from offset ${starts[0]} to the segment at ${starts.at(-1)}` : ""),
  ];
  if (c.manifest) {
    parts.push(
      `manifest of ${new Date(c.manifest.writtenAt).toISOString()} listing ` +
        `${c.manifest.segments.length} segment(s)` +
        (c.manifest.owner ? ` by agent ${c.manifest.owner}` : ""),
    );
  } else if (c.manifestProblem) parts.push(`manifest unreadable: ${c.manifestProblem}`);
  else parts.push("no manifest");
  if (c.objects.newest) parts.push(`newest object ${c.objects.newest.toISOString()}`);
  return parts.join(", ");
}

/** The operator's choice among candidates (`--incarnation`, `--generation`). */
export interface NamedCandidate {
  incarnation?: bigint;
  generation?: bigint;
}

/** How a choice came out. */
export type Choice =
  | { kind: "chosen"; candidate: Candidate; why: string }
  | { kind: "competing"; candidates: Candidate[] }
  | { kind: "none" }
  | { kind: "not-found"; named: NamedCandidate };

/**
 * Chooses the partition's current incarnation and generation: the one the operator named, else
 * the only candidate; several compete, and none is chosen by date.
 */
export function chooseCandidate(set: CandidateSet, named: NamedCandidate = {}): Choice {
  if (named.incarnation !== undefined || named.generation !== undefined) {
    const all = [...set.eligible, ...set.excluded.map((e) => e.candidate)];
    const matching = all.filter((c) =>
      (named.incarnation === undefined || c.incarnation === named.incarnation) &&
      (named.generation === undefined || c.generation === named.generation)
    );
    if (matching.length === 0) return { kind: "not-found", named };
    if (matching.length > 1) return { kind: "competing", candidates: matching };
    return { kind: "chosen", candidate: matching[0], why: "named by the operator" };
  }
  if (set.eligible.length === 0) return { kind: "none" };
  if (set.eligible.length > 1) return { kind: "competing", candidates: set.eligible };
  return {
    kind: "chosen",
    candidate: set.eligible[0],
    why: set.excluded.length === 0
      ? "the only incarnation and generation in the bucket"
      : "the only candidate: the others were retired or are not this key space's",
  };
}

/** Several incarnations or generations could be the partition: no one is chosen by date. */
export class CandidatesCompete extends Error {
  override readonly name = "CandidatesCompete";
  constructor(readonly partition: string, readonly candidates: readonly Candidate[]) {
    const [stream, topic, p] = partition.split("/");
    super(
      `partition ${partition}: ${candidates.length} incarnations or generations in the bucket ` +
        `could be this partition and nothing decides between them: ${
          candidates.map(describeCandidate).join("; ")
        }. Stop the agent and name one: tierd restore --stream ${stream} --topic ${topic} ` +
        `--partition ${p} --incarnation I --generation G`,
    );
  }
}
