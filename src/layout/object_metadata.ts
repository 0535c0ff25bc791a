// User metadata on a remote `.log` object: the segment's facts plus its format, enough to
// rebuild a segment's record from a listing plus HEADs and to verify a copy without a download.
import type { FormatName } from "../format/types.ts";
import { hex128 } from "../hash.ts";
import type { UserMetadata } from "../../providers/types.ts";
import { VERSION } from "../version.ts";
import { sameFacts, type SegmentFacts } from "./segment_facts.ts";

/** A segment's facts as its `.log` object carries them: with the partition's format. */
export interface ObjectFacts extends SegmentFacts {
  readonly format: FormatName;
}

/** Encodes segment facts as object user metadata. */
export function toUserMetadata(m: ObjectFacts): UserMetadata {
  return {
    "end-offset": m.endOffset.toString(),
    "start-timestamp": m.startTimestamp.toString(),
    "end-timestamp": m.endTimestamp.toString(),
    "max-timestamp": m.maxTimestamp.toString(),
    "size": String(m.size),
    "index-size": String(m.indexSize),
    "format": m.format,
    "xxh3-128": hex128(m.checksum),
    "tierd-version": VERSION,
  };
}

/** Thrown when an object's metadata is missing a field or holds a bad value. */
export class MetadataError extends Error {
  override readonly name = "MetadataError";
  constructor(readonly key: string, message: string) {
    super(`${key}: ${message}`);
  }
}

/** Decodes object user metadata written by {@link toUserMetadata}. */
export function fromUserMetadata(key: string, md: UserMetadata): ObjectFacts {
  const need = (name: string, re: RegExp): string => {
    const v = md[name];
    if (v === undefined) throw new MetadataError(key, `metadata "${name}" is missing`);
    if (!re.test(v)) {
      throw new MetadataError(key, `metadata "${name}" has bad value ${JSON.stringify(v)}`);
    }
    return v;
  };
  const uint = /^\d{1,20}$/;
  const format = need("format", /^iggy-0\.[89]$/) as FormatName;
  return {
    endOffset: BigInt(need("end-offset", /^-?\d{1,20}$/)),
    startTimestamp: BigInt(need("start-timestamp", uint)),
    endTimestamp: BigInt(need("end-timestamp", uint)),
    maxTimestamp: BigInt(need("max-timestamp", uint)),
    size: Number(need("size", uint)),
    indexSize: Number(need("index-size", uint)),
    format,
    checksum: BigInt("0x" + need("xxh3-128", /^[0-9a-f]{32}$/)),
  };
}

/** True when a remote object's metadata describes exactly this local segment. */
export function sameSegment(a: ObjectFacts, b: ObjectFacts): boolean {
  return sameFacts(a, b) && a.format === b.format;
}
