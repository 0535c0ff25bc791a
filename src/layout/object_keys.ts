// Object keys of remote segments and manifests (docs/architecture.md, "Objects in the bucket").
// Keys are deterministic, so a repeated or concurrent upload of the same segment lands on the
// same key; and they parse back, so a listing says which incarnation and generation an object
// belongs to.
import { type KeySpace, keySpaceRoot } from "./key_space.ts";
import { incarnationHex, type PartitionId, segmentStem } from "./partition.ts";

/** Everything that names a partition's remote directory. */
export interface RemoteLocation extends PartitionId {
  prefix: string;
  clusterId: string;
  incarnation: bigint;
  generation: bigint;
}

function join(...parts: string[]): string {
  return parts.filter((p) => p !== "").join("/");
}

/** The parts of a key above one partition's objects. */
export interface PartitionRoot extends PartitionId {
  prefix: string;
  clusterId: string;
}

/** `{prefix}/{cluster}/{s}/{t}/{p}/`: every incarnation and generation of a partition. */
export function partitionRoot(loc: PartitionRoot): string {
  return join(
    loc.prefix.replace(/\/+$/, ""),
    loc.clusterId,
    String(loc.stream),
    String(loc.topic),
    String(loc.partition),
  ) + "/";
}

/** `{prefix}/{cluster}/`: where this cluster's objects live (everything tierd wrote). */
export function clusterRoot(loc: KeySpace): string {
  return keySpaceRoot(loc);
}

/** `{prefix}/{cluster}/owner.json`: who owns the key space (src/ownership/owner_record.ts). */
export function ownerKey(ks: KeySpace): string {
  return keySpaceRoot(ks) + "owner.json";
}

/** `{prefix}/{cluster}/{s}/{t}/{p}/{incarnation}-{generation}/` */
export function partitionPrefix(loc: RemoteLocation): string {
  return partitionRoot(loc) + `${incarnationHex(loc.incarnation)}-${loc.generation}/`;
}

/** A segment object's key, parsed. */
export interface ParsedSegmentKey {
  incarnation: bigint;
  generation: bigint;
  start: bigint;
  ext: "log" | "index";
}

const SEGMENT_KEY = /^([0-9a-f]{16})-(0|[1-9][0-9]{0,19})\/([0-9]{20})\.(log|index)$/;

/**
 * Parses a key under `root` (a {@linkcode partitionRoot}) into the incarnation, generation
 * and segment it names; undefined for any other key (a manifest, a stranger's object).
 */
export function parseSegmentKey(root: string, key: string): ParsedSegmentKey | undefined {
  if (!key.startsWith(root)) return undefined;
  const m = SEGMENT_KEY.exec(key.slice(root.length));
  if (!m) return undefined;
  return {
    incarnation: BigInt("0x" + m[1]),
    generation: BigInt(m[2]),
    start: BigInt(m[3]),
    ext: m[4] as "log" | "index",
  };
}

const SEGMENT_KEY_TAIL =
  /(?:^|\/)(0|[1-9][0-9]*)\/(0|[1-9][0-9]*)\/(0|[1-9][0-9]*)\/[0-9a-f]{16}-(?:0|[1-9][0-9]{0,19})\/[0-9]{20}\.(?:log|index)$/;

/**
 * The partition a segment object's key names, read from the key's end (so whatever the prefix
 * and cluster id hold): for labelling what the store did by stream and topic. Undefined for any
 * other key (a manifest, the owner record, a stranger's object).
 */
export function partitionOfSegmentKey(key: string): PartitionId | undefined {
  const m = SEGMENT_KEY_TAIL.exec(key);
  if (!m) return undefined;
  return { stream: Number(m[1]), topic: Number(m[2]), partition: Number(m[3]) };
}

/** Keys of one segment's `.log` and `.index` objects. */
export function segmentKeys(loc: RemoteLocation, start: bigint): { log: string; index: string } {
  const base = partitionPrefix(loc) + segmentStem(start);
  return { log: `${base}.log`, index: `${base}.index` };
}

/** `{prefix}/{cluster}/meta/{s}/{t}/{p}/{incarnation}-{generation}/manifest.json` */
export function manifestKey(loc: RemoteLocation): string {
  return join(
    loc.prefix.replace(/\/+$/, ""),
    loc.clusterId,
    "meta",
    String(loc.stream),
    String(loc.topic),
    String(loc.partition),
    `${incarnationHex(loc.incarnation)}-${loc.generation}`,
    "manifest.json",
  );
}
