// The record boundaries of a broker's segment bytes, read with the e2e suite's own few lines
// (not tierd's codec, which is what is under test): 0.8 messages (64-byte header) and 0.9
// batches (256-byte header), and a partition's segments laid end to end to check raw reads.

/** Segment formats of the two servers. */
export type IggyFormat = "iggy-0.8" | "iggy-0.9";

/** One record: a 0.8 message or a 0.9 batch. Positions are within its segment. */
export interface RecordSpan {
  first: bigint;
  last: bigint;
  start: number;
  end: number;
}

/** Bytes that do not tile into whole records. */
export class RecordWalkError extends Error {
  override readonly name = "RecordWalkError";
}

/**
 * Walks `bytes` (one `.log`) record by record.
 * @throws {RecordWalkError} when a record runs past the end or has an impossible length
 */
export function walkRecords(format: IggyFormat, bytes: Uint8Array, what: string): RecordSpan[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: RecordSpan[] = [];
  const header = format === "iggy-0.8" ? 64 : 256;
  for (let at = 0; at < bytes.length;) {
    if (bytes.length - at < header) {
      throw new RecordWalkError(`${what}: ${bytes.length - at} trailing bytes at ${at}`);
    }
    let first: bigint, last: bigint, size: number;
    if (format === "iggy-0.8") {
      first = last = view.getBigUint64(at + 24, true);
      size = header + view.getUint32(at + 48, true) + view.getUint32(at + 52, true);
    } else {
      first = view.getBigUint64(at + 8, true);
      size = Number(view.getBigUint64(at + 32, true));
      last = first + BigInt(view.getUint32(at + 48, true)) - 1n;
    }
    if (size < header || at + size > bytes.length) {
      throw new RecordWalkError(`${what}: record at ${at} (offset ${first}) of ${size} bytes`);
    }
    out.push({ first, last, start: at, end: at + size });
    at += size;
  }
  return out;
}

/** A segment's bytes with its start offset. */
export interface SegmentBytes {
  start: bigint;
  log: Uint8Array;
}

/** A partition's segments end to end, with every record's place in the whole. */
export class PartitionBytes {
  readonly whole: Uint8Array;
  /** Records in offset order; `start`/`end` are positions in {@link whole}. */
  readonly records: RecordSpan[];

  constructor(format: IggyFormat, segments: SegmentBytes[], what: string) {
    const sorted = [...segments].sort((a, b) => (a.start < b.start ? -1 : 1));
    this.whole = new Uint8Array(sorted.reduce((n, s) => n + s.log.length, 0));
    this.records = [];
    let at = 0;
    for (const s of sorted) {
      this.whole.set(s.log, at);
      for (const r of walkRecords(format, s.log, `${what} segment ${s.start}`)) {
        this.records.push({ ...r, start: r.start + at, end: r.end + at });
      }
      at += s.log.length;
    }
  }

  /** The record holding `offset`. */
  recordOf(offset: bigint): RecordSpan | undefined {
    let lo = 0;
    let hi = this.records.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = this.records[mid];
      if (offset < r.first) hi = mid - 1;
      else if (offset > r.last) lo = mid + 1;
      else return r;
    }
    return undefined;
  }

  /** The record that starts at byte `position` of the whole, if one does. */
  recordStartingAt(position: number): RecordSpan | undefined {
    let lo = 0;
    let hi = this.records.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = this.records[mid];
      if (position < r.start) hi = mid - 1;
      else if (position > r.start) lo = mid + 1;
      else return r;
    }
    return undefined;
  }
}
