// Object keys of remote segments (docs/architecture.md, "Objects in the bucket"). Keys are
// deterministic, so a repeated or concurrent upload of the same segment lands on the same key.
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

/** `{prefix}/{cluster}/{s}/{t}/{p}/{incarnation}-{generation}/` */
export function partitionPrefix(loc: RemoteLocation): string {
  return join(
    loc.prefix.replace(/\/+$/, ""),
    loc.clusterId,
    String(loc.stream),
    String(loc.topic),
    String(loc.partition),
    `${incarnationHex(loc.incarnation)}-${loc.generation}`,
  ) + "/";
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
