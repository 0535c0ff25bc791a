// The e2e suite's checks of tierd beside a real Iggy server: objects equal the broker's bytes,
// every offset reads back (raw and JSON) equal to what was sent and to the server's own poll,
// and the server's stats agree with its files. Each check throws an assertion naming the place.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { join } from "node:path";

import { type IggyHeaderEntry, type PolledMessage, toBase64 } from "./_iggy_http.ts";
import { PartitionBytes, type SegmentBytes } from "./_iggy_records.ts";
import type { Tierd, TierdJsonMessage } from "./_iggy_tierd.ts";
import { sameBytes, type SentMessage, type TopicUnderTest } from "./_iggy_topic.ts";
import { type KeptSegment, logStarts, type SegmentKeeper, stem } from "./_iggy_watch.ts";
import type { BrokerCall } from "./_iggy_tap.ts";
import type { ExpectedHeader } from "./_iggy_workload.ts";

/** Slack between this process's millisecond clock and the server's (same machine), µs. */
const CLOCK_SLACK_US = 5_000n;

/** A partition's segments as the broker wrote them: kept copies of sealed ones, then local. */
export interface PartitionFiles {
  /** Sealed segments by start (kept as they sealed; still local or evicted). */
  sealed: Map<bigint, KeptSegment>;
  /** Starts of the segments the broker still has, ascending (the last is active). */
  local: bigint[];
  /** Every segment end to end. */
  bytes: PartitionBytes;
}

/**
 * Gathers a partition's files: every sealed segment must have been kept (the keeper saw it
 * before tierd evicted it), and a sealed segment still local must not have changed since.
 */
export async function partitionFiles(
  topic: TopicUnderTest,
  keeper: SegmentKeeper,
  partition: number,
): Promise<PartitionFiles> {
  await keeper.scan();
  const dir = topic.partitionDir(partition);
  const local = await logStarts(dir);
  const kept = keeper.kept(partition);
  const segments: SegmentBytes[] = [];
  for (const [start, k] of kept) {
    if (local.includes(start)) {
      const now = await Deno.readFile(join(dir, `${stem(start)}.log`));
      assert.ok(sameBytes(now, k.log), `partition ${partition}: sealed segment ${start} changed`);
    }
    segments.push({ start, log: k.log });
  }
  const active = local.at(-1)!;
  assert.ok(!kept.has(active), `partition ${partition}: the active segment ${active} was kept`);
  segments.push({ start: active, log: await Deno.readFile(join(dir, `${stem(active)}.log`)) });
  const bytes = new PartitionBytes(topic.format, segments, `partition ${partition}`);
  // The chain has no hole: each segment starts where the one before ended.
  const starts = segments.map((s) => s.start).sort((a, b) => (a < b ? -1 : 1));
  assert.equal(starts[0], 0n, `partition ${partition}: the first kept segment starts at 0`);
  for (const s of starts.slice(1)) {
    assert.ok(bytes.recordOf(s - 1n), `partition ${partition}: offsets before segment ${s} exist`);
    // The active segment is empty right after a rotation.
    if (s === active && segments.at(-1)!.log.length === 0) continue;
    assert.equal(
      bytes.recordOf(s)?.first,
      s,
      `partition ${partition}: segment ${s} starts a record`,
    );
  }
  const last = topic.nextOffset(partition) - 1n;
  assert.equal(bytes.records.at(-1)?.last, last, `partition ${partition}: files end at ${last}`);
  return { sealed: kept, local, bytes };
}

/**
 * Every object tierd wrote for the partition equals the broker's bytes of that segment, never
 * the active one; every evicted segment has both its objects.
 * @returns how many segments are in the store
 */
export async function checkObjects(
  tierd: Tierd,
  partition: number,
  files: PartitionFiles,
): Promise<number> {
  const objects = await listBounded(tierd.store, tierd.keyPrefix(partition));
  const dirs = new Set(objects.map((o) => o.key.split("/").at(-2)));
  assert.equal(dirs.size, 1, `partition ${partition}: one incarnation-generation: ${[...dirs]}`);
  const byName = new Map(objects.map((o) => [o.key.split("/").at(-1)!, o.key]));
  const active = files.local.at(-1)!;
  let segments = 0;
  for (const [name, key] of byName) {
    const m = /^(\d{20})\.(log|index)$/.exec(name);
    assert.ok(m, `partition ${partition}: unexpected object ${key}`);
    const start = BigInt(m[1]);
    assert.notEqual(start, active, `partition ${partition}: the active segment is in the store`);
    const kept = files.sealed.get(start);
    assert.ok(kept, `partition ${partition}: object ${key} is not a sealed segment the broker had`);
    const body = (await tierd.store.get(key)).bytes;
    const want = m[2] === "log" ? kept.log : kept.index;
    assert.ok(
      sameBytes(body, want),
      `${key}: ${body.length} bytes differ from the broker's ${want.length}`,
    );
    if (m[2] === "log") segments++;
  }
  for (const start of files.sealed.keys()) {
    if (files.local.includes(start)) continue;
    for (const ext of ["log", "index"]) {
      assert.ok(
        byName.has(`${stem(start)}.${ext}`),
        `partition ${partition}: evicted segment ${start} has no .${ext} object`,
      );
    }
  }
  return segments;
}

const headerOrder = (h: { key_kind: string; key: unknown }) =>
  `${h.key_kind}:${JSON.stringify(h.key)}`;
const wireOrder = (h: IggyHeaderEntry) => `${h.key.kind}:${h.key.value}`;

function sortedBy<T>(items: T[], key: (t: T) => string): T[] {
  return [...items].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/**
 * The server's poll answer for a sent message equals what was sent, with timestamps taken while
 * the send was in flight.
 */
export function expectPolledAsSent(polled: PolledMessage, sent: SentMessage, where: string): void {
  assert.equal(polled.offset, sent.offset, `${where}: offset`);
  assert.equal(polled.id, sent.id, `${where}: id`);
  assert.ok(sameBytes(polled.payload, sent.payload), `${where}: payload`);
  assert.ok(Array.isArray(polled.headers), `${where}: the server parsed the headers`);
  assert.deepEqual(
    sortedBy(polled.headers as IggyHeaderEntry[], wireOrder),
    sortedBy(sent.headers, wireOrder),
    `${where}: headers`,
  );
  assert.ok(
    sent.sentFrom - CLOCK_SLACK_US <= polled.originTimestamp &&
      polled.originTimestamp <= polled.timestamp &&
      polled.timestamp <= sent.sentTo + CLOCK_SLACK_US,
    `${where}: timestamps ${polled.originTimestamp}/${polled.timestamp} outside the send ` +
      `${sent.sentFrom}..${sent.sentTo}`,
  );
}

/** The server still answers a message exactly as it did right after the send. */
export function expectSamePoll(now: PolledMessage, before: PolledMessage, where: string): void {
  assert.deepEqual(
    { ...now, payload: toBase64(now.payload) },
    { ...before, payload: toBase64(before.payload) },
    `${where}: the server's answer changed`,
  );
}

const payloadBase64 = new WeakMap<SentMessage, string>();
const sentBase64 = (m: SentMessage) => {
  let text = payloadBase64.get(m);
  if (text === undefined) payloadBase64.set(m, text = toBase64(m.payload));
  return text;
};

/** A message of tierd's JSON equals what was sent and the server's poll answer. */
export function expectJsonAsSent(
  m: TierdJsonMessage,
  sent: SentMessage,
  polled: PolledMessage,
  where: string,
): void {
  assert.equal(m.id, sent.id.toString(), `${where}: id`);
  assert.equal(m.payload, sentBase64(sent), `${where}: payload`);
  assert.ok(m.headers, `${where}: tierd parsed the headers (raw: ${m.headers_raw})`);
  assert.deepEqual(
    sortedBy(m.headers as ExpectedHeader[], headerOrder),
    sortedBy(sent.expectedHeaders, headerOrder),
    `${where}: headers`,
  );
  assert.equal(m.timestamp, polled.timestamp.toString(), `${where}: timestamp`);
  assert.equal(m.origin_timestamp, polled.originTimestamp.toString(), `${where}: origin_timestamp`);
}

/** Polls `partition` from `from` to its end in pages. */
export async function pollAll(
  topic: TopicUnderTest,
  partition: number,
  from: bigint,
): Promise<Map<bigint, PolledMessage>> {
  const out = new Map<bigint, PolledMessage>();
  const end = topic.nextOffset(partition);
  for (let offset = from; offset < end;) {
    const page = await topic.client.poll(topic.stream, topic.topic, partition, offset, 100);
    assert.ok(page.length > 0, `partition ${partition}: the server answers nothing at ${offset}`);
    for (const m of page) out.set(m.offset, m);
    offset = page.at(-1)!.offset + 1n;
  }
  return out;
}

/** What reading every offset through tierd saw. */
export interface EveryOffsetReport {
  reads: number;
  sources: Record<string, number>;
  /** JSON answers whose first message is below the offset asked for (0.9 batches). */
  jsonStartsBelow: number;
}

async function inPool<T>(items: T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

/**
 * Reads every offset of `offsets` through tierd, raw and `format=json`, with a 1-byte budget
 * (one whole record): the raw answer is exactly the broker's record holding the offset, and the
 * JSON answer holds that offset's message as sent and as the server polled it (`serverNow` for
 * offsets the server still has, else its answer right after the send).
 */
export async function checkEveryOffset(
  tierd: Tierd,
  topic: TopicUnderTest,
  partition: number,
  files: PartitionFiles,
  offsets: bigint[],
  serverNow: Map<bigint, PolledMessage>,
): Promise<EveryOffsetReport> {
  const report: EveryOffsetReport = { reads: 0, sources: {}, jsonStartsBelow: 0 };
  const sent = topic.sent.get(partition)!;
  await inPool(offsets, 6, async (offset) => {
    const where = `partition ${partition} offset ${offset}`;
    const record = files.bytes.recordOf(offset);
    assert.ok(record, `${where}: in the broker's files`);
    const raw = await tierd.readRaw(partition, offset, 1);
    report.sources[raw.source] = (report.sources[raw.source] ?? 0) + 1;
    assert.equal(raw.firstOffset, record.first, `${where}: x-tierd-first-offset`);
    assert.equal(raw.nextOffset, record.last + 1n, `${where}: x-tierd-next-offset`);
    assert.equal(raw.records, 1, `${where}: one record for a 1-byte budget`);
    assert.equal(raw.format, topic.format, `${where}: x-tierd-format`);
    assert.equal(raw.gap, null, `${where}: no gap`);
    assert.ok(
      sameBytes(raw.bytes, files.bytes.whole.subarray(record.start, record.end)),
      `${where}: raw bytes (${raw.bytes.length}) differ from the broker's record ` +
        `(${record.end - record.start})`,
    );
    const json = await tierd.readJson(partition, offset, 1);
    assert.equal(json.source, raw.source, `${where}: JSON and raw read the same place`);
    assert.equal(json.gap, null, `${where}: no gap in JSON`);
    assert.equal(json.first_offset, String(raw.firstOffset), `${where}: JSON first_offset`);
    assert.equal(json.next_offset, String(raw.nextOffset), `${where}: JSON next_offset`);
    const offsetsInJson = json.messages.map((m) => BigInt(m.offset));
    assert.ok(offsetsInJson.includes(offset), `${where}: JSON has offsets ${offsetsInJson}`);
    if (offsetsInJson[0] < offset) report.jsonStartsBelow++;
    for (const m of json.messages) {
      const at = BigInt(m.offset);
      const s = sent.get(at);
      assert.ok(s, `${where}: JSON message at offset ${at} was never sent`);
      expectJsonAsSent(m, s, serverNow.get(at) ?? s.polled, `${where} (JSON message ${at})`);
    }
    report.reads++;
  });
  return report;
}

/**
 * A read from a few offsets before the last evicted segment's end with a large budget: it must
 * come from the store and the broker's files together (`mixed`), byte-equal to both.
 */
export async function checkMixedRead(
  tierd: Tierd,
  partition: number,
  files: PartitionFiles,
): Promise<void> {
  const firstLocal = files.local[0];
  const from = firstLocal - 3n;
  const read = await tierd.readRaw(partition, from, 4 * 1024 * 1024);
  assert.equal(read.source, "mixed", `partition ${partition}: a read from ${from} spans both`);
  const record = files.bytes.recordOf(from)!;
  assert.equal(read.firstOffset, record.first);
  assert.ok(read.nextOffset > firstLocal, `partition ${partition}: the read went on locally`);
  const end = record.start + read.bytes.length;
  assert.ok(
    sameBytes(read.bytes, files.bytes.whole.subarray(record.start, end)),
    `partition ${partition}: mixed read bytes differ from the broker's`,
  );
  const next = files.bytes.recordStartingAt(end);
  assert.equal(read.nextOffset, next?.first ?? files.bytes.records.at(-1)!.last + 1n);
}

/**
 * Bytes a human size of Iggy's allows: `"154 B"`, `"1.05 MB"` (decimal units), or a binary unit
 * when the server's serializer (byte-unit's `Byte`) finds one that states the size exactly,
 * `"3068.25 KiB"` = 3,141,888 bytes; the last decimal is taken as rounded either way.
 */
export function humanSizeRange(text: string): { min: number; max: number } {
  const m = /^(\d+(?:\.\d+)?) (B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$/.exec(text);
  assert.ok(m, `a size like "1.05 MB" or "3068.25 KiB": ${JSON.stringify(text)}`);
  const binary = ["B", "KiB", "MiB", "GiB", "TiB"].indexOf(m[2]);
  const unit = binary > 0 ? 1024 ** binary : 1000 ** ["B", "KB", "MB", "GB", "TB"].indexOf(m[2]);
  const value = Number(m[1]);
  const decimals = m[1].split(".")[1]?.length ?? 0;
  const half = m[2] === "B" ? 0 : 0.5 * 10 ** -decimals * unit;
  return { min: value * unit - half, max: value * unit + half };
}

/**
 * The server's stats (`GET /streams/{s}/topics/{t}`, `GET /streams/{s}`) agree with its files
 * and with what was sent: per partition the current offset, the segment count, the messages it
 * still holds and their bytes; for the topic and the stream the sums.
 */
export async function checkServerStats(
  topic: TopicUnderTest,
  files: Map<number, PartitionFiles>,
): Promise<void> {
  const details = await topic.client.topic(topic.stream, topic.topic);
  let messages = 0n;
  let bytes = 0;
  for (const [p, f] of files) {
    const stats = details.partitions.find((x) => x.id === p);
    assert.ok(stats, `the server lists partition ${p}`);
    const last = topic.nextOffset(p) - 1n;
    const held = last - f.local[0] + 1n;
    let size = 0;
    for (const s of f.local) {
      size += (await Deno.stat(join(topic.partitionDir(p), `${stem(s)}.log`))).size;
    }
    const where = `Iggy ${topic.server.version} partition ${p} stats ${JSON.stringify(stats, big)}`;
    assert.equal(stats.currentOffset, last, `${where}: current_offset`);
    assert.equal(stats.segmentsCount, f.local.length, `${where}: segments_count`);
    assert.equal(stats.messagesCount, held, `${where}: messages_count (offsets ${f.local[0]}..)`);
    const range = humanSizeRange(stats.size);
    assert.ok(range.min <= size && size <= range.max, `${where}: size, local files hold ${size} B`);
    messages += held;
    bytes += size;
  }
  assert.equal(details.messagesCount, messages, "the topic's messages_count");
  const range = humanSizeRange(details.size);
  assert.ok(range.min <= bytes && bytes <= range.max, `topic size ${details.size} vs ${bytes} B`);
  const stream = await topic.client.stream(topic.stream);
  assert.equal(stream.topicsCount, 1, "the stream's topics_count");
  assert.equal(stream.messagesCount, messages, "the stream's messages_count");
  assert.equal(stream.size, details.size, "the stream's size");
}

const big = (_key: string, value: unknown) => typeof value === "bigint" ? value.toString() : value;

/**
 * tierd's calls to the broker after its restart: its calls with a JWT from before (a
 * DeleteSegments, or a read asking for a topic's details) were refused (401), tierd logged in
 * again no more often than it was refused, and every call with a new JWT succeeded.
 * @param before tierd's calls before the restart (their logins issued the old JWTs)
 * @param after tierd's calls since the restart
 */
export function expectLoggedInAgain(before: BrokerCall[], after: BrokerCall[]): void {
  const answered = after.filter((c) => c.status !== undefined); // not while the server was down
  const old = new Set(before.map((c) => c.issued).filter((t) => t));
  const own = (c: BrokerCall) =>
    c.method === "DELETE" || (c.method === "GET" && /^\/streams\/\d+\/topics\/\d+$/.test(c.path));
  const refused = answered.filter((c) => own(c) && old.has(c.token));
  assert.ok(refused.length > 0, "tierd first tried its JWT from before the restart");
  assert.ok(refused.every((c) => c.status === 401), JSON.stringify(refused));
  const issued = answered.filter((c) => c.path === "/users/login").map((c) => c.issued);
  assert.ok(issued.length > 0 && issued.length <= refused.length, `${issued.length} logins`);
  assert.ok(issued.every((token) => token && !old.has(token)), "new JWTs were issued");
  const renewed = answered.filter((c) => own(c) && issued.includes(c.token));
  const ok = (c: BrokerCall) => c.status === (c.method === "DELETE" ? 204 : 200);
  assert.ok(renewed.length > 0 && renewed.every(ok), JSON.stringify(renewed));
  assert.equal(renewed.length + refused.length + issued.length, answered.length, "no other call");
}
