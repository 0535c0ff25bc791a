// One generation's segment records, kept by column in typed arrays rather than as a Map of
// objects holding BigInts: a partition with many thousand evicted segments costs about a hundred
// bytes a segment at rest, not a kilobyte. A record is built when it is asked for (records are
// values: nothing holds on to one, and none is ever mutated), so the table reads as the
// ReadonlyMap of records the rest of tierd expects. Only the folding in segment_state.ts writes.
import { SEGMENT_STATES as STATES, type SegmentRecord } from "./segment_record.ts";

const STATE_CODE = new Map(STATES.map((s, i) => [s, i]));
const STATE_MASK = 0b111;
const EVICTED = 0b1000;
const HAS_META = 0b10000;

/** u64 columns per row: start, endOffset, the three timestamps, the checksum's low and high. */
const U64_PER_ROW = 7;
/** f64 columns per row: since, size, indexSize. */
const F64_PER_ROW = 3;
const U64_MAX = (1n << 64n) - 1n;

/** The fields of a record kept beside the columns: the rare ones (upload ids, reasons, causes). */
type Extras = Omit<SegmentRecord, "start" | "generation" | "state" | "since" | "evicted" | "meta">;

/** The fields kept as extras, present in a record or not as they were set. */
const EXTRA_KEYS = [
  "uploadId",
  "multipartKey",
  "danglingReason",
  "deleteCause",
  "lostEndOffset",
  "holeReason",
] as const satisfies readonly (keyof Extras)[];

function u64(value: bigint, what: string): bigint {
  if (value < 0n || value > U64_MAX) throw new RangeError(`${what} ${value} is not a u64`);
  return value;
}

const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);

/** The key a start offset is found under (a number while exact: cheaper than a bigint key). */
function rowKey(start: bigint): number | bigint {
  return start <= MAX_EXACT ? Number(start) : start;
}

/** The row keys of rows set out of start order (rare: a journal records segments in order). */
type RowIndex = Map<number | bigint, number>;

/** The records of one generation, by start offset, in the order they were first set. */
export class SegmentTable implements ReadonlyMap<bigint, SegmentRecord> {
  readonly generation: bigint;
  #count = 0;
  #u64: BigUint64Array;
  #f64: Float64Array;
  #flags: Uint8Array;
  #extras = new Map<number, Extras>();
  /**
   * Undefined while the rows are in ascending start order, as a journal sets them: a row is then
   * found by a binary search of the start column, and the table holds no per-row index (a Map
   * entry a row was most of a segment's memory at rest). Built once a row comes out of order.
   */
  #rows: RowIndex | undefined;

  /**
   * @param generation the generation every record of the table belongs to
   * @param capacity rows to make room for at first
   */
  constructor(generation: bigint, capacity = 4) {
    this.generation = generation;
    this.#u64 = new BigUint64Array(capacity * U64_PER_ROW);
    this.#f64 = new Float64Array(capacity * F64_PER_ROW);
    this.#flags = new Uint8Array(capacity);
  }

  /** A table holding `records` (a plain map's, say), which must all be of `generation`. */
  static of(generation: bigint, records: Iterable<SegmentRecord>): SegmentTable {
    const t = new SegmentTable(generation);
    for (const r of records) t.set(r);
    return t;
  }

  /** An independent copy (the folding copies a generation before it changes it). */
  clone(): SegmentTable {
    const t = new SegmentTable(this.generation, Math.max(4, this.#count));
    t.#count = this.#count;
    t.#u64.set(this.#u64.subarray(0, this.#count * U64_PER_ROW));
    t.#f64.set(this.#f64.subarray(0, this.#count * F64_PER_ROW));
    t.#flags.set(this.#flags.subarray(0, this.#count));
    t.#extras = new Map(this.#extras);
    t.#rows = this.#rows && new Map(this.#rows);
    return t;
  }

  /**
   * Sets the record of `record.start`, replacing any. Only for tables nobody else sees yet.
   * @throws {RangeError} for a record of another generation or a field out of range
   */
  set(record: SegmentRecord): this {
    if (record.generation !== this.generation) {
      throw new RangeError(
        `record of generation ${record.generation} in the table of generation ${this.generation}`,
      );
    }
    const start = u64(record.start, "start offset");
    const m = record.meta;
    const facts = m && [
      u64(m.endOffset, "end offset"),
      u64(m.startTimestamp, "start timestamp"),
      u64(m.endTimestamp, "end timestamp"),
      u64(m.maxTimestamp, "max timestamp"),
      m.checksum & U64_MAX,
      u64(m.checksum >> 64n, "checksum"),
    ];
    let row = this.#rowOf(start);
    if (row === undefined) {
      row = this.#count++;
      this.#grow();
      this.#index(row, start);
    }
    const u = row * U64_PER_ROW;
    const f = row * F64_PER_ROW;
    this.#u64[u] = start;
    this.#f64[f] = record.since;
    let flags = STATE_CODE.get(record.state)! | (record.evicted ? EVICTED : 0);
    if (m && facts) {
      flags |= HAS_META;
      this.#u64.set(facts, u + 1);
      this.#f64[f + 1] = m.size;
      this.#f64[f + 2] = m.indexSize;
    }
    this.#flags[row] = flags;
    let extras: Record<string, unknown> | undefined;
    for (const k of EXTRA_KEYS) if (k in record) (extras ??= {})[k] = record[k];
    if (extras) this.#extras.set(row, extras as Extras);
    else this.#extras.delete(row);
    return this;
  }

  get size(): number {
    return this.#count;
  }

  get(start: bigint): SegmentRecord | undefined {
    const row = this.#rowOf(start);
    return row === undefined ? undefined : this.#record(row);
  }

  has(start: bigint): boolean {
    return this.#rowOf(start) !== undefined;
  }

  /** The row holding `start`, if any. */
  #rowOf(start: bigint): number | undefined {
    if (this.#rows) return this.#rows.get(rowKey(start));
    let lo = 0;
    let hi = this.#count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const at = this.#u64[mid * U64_PER_ROW];
      if (at === start) return mid;
      if (at < start) lo = mid + 1;
      else hi = mid;
    }
    return undefined;
  }

  /** Makes new row `row` findable by `start` (its start column is written by the caller). */
  #index(row: number, start: bigint): void {
    if (!this.#rows && row > 0 && this.#u64[(row - 1) * U64_PER_ROW] > start) {
      const rows: RowIndex = new Map();
      for (let r = 0; r < row; r++) rows.set(rowKey(this.#u64[r * U64_PER_ROW]), r);
      this.#rows = rows;
    }
    this.#rows?.set(rowKey(start), row);
  }

  *keys(): MapIterator<bigint> {
    for (let row = 0; row < this.#count; row++) yield this.#u64[row * U64_PER_ROW];
  }

  *values(): MapIterator<SegmentRecord> {
    for (let row = 0; row < this.#count; row++) yield this.#record(row);
  }

  *entries(): MapIterator<[bigint, SegmentRecord]> {
    for (let row = 0; row < this.#count; row++) {
      const r = this.#record(row);
      yield [r.start, r];
    }
  }

  [Symbol.iterator](): MapIterator<[bigint, SegmentRecord]> {
    return this.entries();
  }

  forEach(
    fn: (value: SegmentRecord, key: bigint, map: ReadonlyMap<bigint, SegmentRecord>) => void,
    thisArg?: unknown,
  ): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }

  #record(row: number): SegmentRecord {
    const u = row * U64_PER_ROW;
    const f = row * F64_PER_ROW;
    const flags = this.#flags[row];
    // Rows are only ever written from whole records, so the row reads back as one of the union.
    const record = {
      start: this.#u64[u],
      generation: this.generation,
      state: STATES[flags & STATE_MASK],
      since: this.#f64[f],
      evicted: (flags & EVICTED) !== 0,
      ...((flags & HAS_META) !== 0 && {
        meta: {
          endOffset: this.#u64[u + 1],
          size: this.#f64[f + 1],
          indexSize: this.#f64[f + 2],
          startTimestamp: this.#u64[u + 2],
          endTimestamp: this.#u64[u + 3],
          maxTimestamp: this.#u64[u + 4],
          checksum: this.#u64[u + 5] | (this.#u64[u + 6] << 64n),
        },
      }),
      ...this.#extras.get(row),
    } as SegmentRecord;
    return record;
  }

  #grow(): void {
    if (this.#count <= this.#flags.length) return;
    const capacity = this.#flags.length * 2;
    const u = new BigUint64Array(capacity * U64_PER_ROW);
    u.set(this.#u64);
    this.#u64 = u;
    const f = new Float64Array(capacity * F64_PER_ROW);
    f.set(this.#f64);
    this.#f64 = f;
    const flags = new Uint8Array(capacity);
    flags.set(this.#flags);
    this.#flags = flags;
  }
}
