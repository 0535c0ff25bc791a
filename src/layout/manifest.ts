// `manifest.json`: one partition incarnation's remote segment list, written beside the objects
// under `{prefix}/{cluster}/meta/…`. It makes the bucket self-describing for a restore or a
// reader on another host: which agent wrote it, the segments, the ranges recorded lost, and —
// on a tombstone — that its owner retired this incarnation and generation. It is derived from
// the journal and never trusted over the objects it lists: whoever reads it checks each entry
// with a HEAD. Versioned; 64-bit values as strings; fields added since version 1 are optional.
import type { FormatName } from "../format/types.ts";
import { hex128 } from "../hash.ts";
import type { SegmentFacts } from "./segment_facts.ts";
import { incarnationHex, type PartitionId } from "./partition.ts";

/** The manifest version this build writes and reads. */
export const MANIFEST_VERSION = 1;

/** One remote segment in a manifest. */
export interface ManifestSegment extends SegmentFacts {
  start: bigint;
  /** Its local files were gone when the manifest was written. */
  evicted: boolean;
}

/** A partition incarnation's remote segments as a manifest lists them. */
export interface Manifest extends PartitionId {
  clusterId: string;
  incarnation: bigint;
  generation: bigint;
  format?: FormatName;
  /** `tiered_up_to_offset`; -1 before the first copy. */
  floor: bigint;
  /** ms since the epoch. */
  writtenAt: number;
  tierdVersion: string;
  segments: ManifestSegment[];
  /** The agent that wrote it (src/ownership/); absent in manifests of older tierd versions. */
  owner?: string;
  /** Offsets the journal records as lost before upload (never in the bucket), inclusive. */
  lost?: ManifestRange[];
  /** Offsets whose copy the bucket was found not to hold (restore or rebuild), inclusive. */
  holes?: ManifestRange[];
  /**
   * Set on a tombstone: the owner retired this incarnation and generation (the topic was
   * recreated, the partition purged); it is swept after `orphan_grace` and never restored.
   */
  retired?: { at: number; reason: string };
}

/** A range of offsets, inclusive. */
export interface ManifestRange {
  from: bigint;
  to: bigint;
}

/** A manifest that cannot be used (not JSON, another version, a bad field). */
export class ManifestError extends Error {
  override readonly name = "ManifestError";
  constructor(readonly key: string, detail: string) {
    super(`manifest ${key}: ${detail}`);
  }
}

/** Encodes a manifest as UTF-8 JSON. */
export function encodeManifest(m: Manifest): Uint8Array {
  const json = {
    version: MANIFEST_VERSION,
    kind: "tierd-partition-manifest",
    cluster_id: m.clusterId,
    stream: m.stream,
    topic: m.topic,
    partition: m.partition,
    incarnation: incarnationHex(m.incarnation),
    generation: String(m.generation),
    format: m.format ?? null,
    tiered_up_to_offset: String(m.floor),
    written_at: new Date(m.writtenAt).toISOString(),
    tierd_version: m.tierdVersion,
    segments: m.segments.map((s) => ({
      start: String(s.start),
      end_offset: String(s.endOffset),
      size: s.size,
      index_size: s.indexSize,
      start_timestamp: String(s.startTimestamp),
      end_timestamp: String(s.endTimestamp),
      max_timestamp: String(s.maxTimestamp),
      xxh3_128: hex128(s.checksum),
      evicted: s.evicted,
    })),
    ...(m.owner !== undefined && { owner: m.owner }),
    ...(m.lost && m.lost.length > 0 && { lost: m.lost.map(rangeJson) }),
    ...(m.holes && m.holes.length > 0 && { holes: m.holes.map(rangeJson) }),
    ...(m.retired && {
      retired_at: new Date(m.retired.at).toISOString(),
      retired_reason: m.retired.reason,
    }),
  };
  return new TextEncoder().encode(JSON.stringify(json, null, 1) + "\n");
}

/**
 * Decodes a manifest, checking every field.
 * @throws {ManifestError} naming the key and the bad field
 */
export function decodeManifest(key: string, bytes: Uint8Array): Manifest {
  const bad = (detail: string): never => {
    throw new ManifestError(key, detail);
  };
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    return bad(`not UTF-8 JSON (${(err as Error).message})`);
  }
  if (typeof j !== "object" || j === null) return bad("not a JSON object");
  if (j.version !== MANIFEST_VERSION) {
    return bad(`version ${JSON.stringify(j.version)}, expected 1`);
  }
  const u64 = (v: unknown, name: string, signed = false): bigint => {
    if (typeof v !== "string" || !(signed ? /^-?\d{1,20}$/ : /^\d{1,20}$/).test(v)) {
      return bad(`${name} is not a decimal string`);
    }
    return BigInt(v);
  };
  const int = (v: unknown, name: string): number =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= 0
      ? v
      : bad(`${name} is not a non-negative integer`);
  if (typeof j.incarnation !== "string" || !/^[0-9a-f]{16}$/.test(j.incarnation)) {
    return bad("incarnation is not 16 hex digits");
  }
  if (j.format !== null && j.format !== "iggy-0.8" && j.format !== "iggy-0.9") {
    return bad(`format ${JSON.stringify(j.format)}`);
  }
  if (!Array.isArray(j.segments)) return bad("segments is not a list");
  const writtenAt = Date.parse(String(j.written_at));
  const ranges = (v: unknown, name: string): ManifestRange[] | undefined => {
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) return bad(`${name} is not a list`);
    return v.map((raw: unknown, i: number) => {
      const r = (raw ?? {}) as Record<string, unknown>;
      const from = u64(r.from, `${name}[${i}].from`);
      const to = u64(r.to, `${name}[${i}].to`);
      return to < from ? bad(`${name}[${i}] ends before it starts`) : { from, to };
    });
  };
  let retired: Manifest["retired"];
  if (j.retired_at !== undefined) {
    const at = Date.parse(String(j.retired_at));
    if (!Number.isFinite(at)) return bad("retired_at is not a time");
    retired = { at, reason: String(j.retired_reason ?? "") };
  }
  if (j.owner !== undefined && (typeof j.owner !== "string" || !/^[0-9a-f]{32}$/.test(j.owner))) {
    return bad("owner is not 32 hex digits");
  }
  const lost = ranges(j.lost, "lost");
  const holes = ranges(j.holes, "holes");
  return {
    clusterId: typeof j.cluster_id === "string" ? j.cluster_id : bad("cluster_id"),
    stream: int(j.stream, "stream"),
    topic: int(j.topic, "topic"),
    partition: int(j.partition, "partition"),
    incarnation: BigInt("0x" + j.incarnation),
    generation: u64(j.generation, "generation"),
    format: (j.format ?? undefined) as FormatName | undefined,
    floor: u64(j.tiered_up_to_offset, "tiered_up_to_offset", true),
    writtenAt: Number.isFinite(writtenAt) ? writtenAt : bad("written_at"),
    tierdVersion: String(j.tierd_version ?? ""),
    segments: j.segments.map((raw: unknown, i: number) => {
      const s = raw as Record<string, unknown>;
      const at = `segments[${i}]`;
      if (typeof s.xxh3_128 !== "string" || !/^[0-9a-f]{32}$/.test(s.xxh3_128)) {
        return bad(`${at}.xxh3_128 is not 32 hex digits`);
      }
      return {
        start: u64(s.start, `${at}.start`),
        endOffset: u64(s.end_offset, `${at}.end_offset`),
        size: int(s.size, `${at}.size`),
        indexSize: int(s.index_size, `${at}.index_size`),
        startTimestamp: u64(s.start_timestamp, `${at}.start_timestamp`),
        endTimestamp: u64(s.end_timestamp, `${at}.end_timestamp`),
        maxTimestamp: u64(s.max_timestamp, `${at}.max_timestamp`),
        checksum: BigInt("0x" + s.xxh3_128),
        evicted: s.evicted === true,
      };
    }),
    ...(typeof j.owner === "string" && { owner: j.owner }),
    ...(lost && { lost }),
    ...(holes && { holes }),
    ...(retired && { retired }),
  };
}

function rangeJson(r: ManifestRange): { from: string; to: string } {
  return { from: String(r.from), to: String(r.to) };
}
