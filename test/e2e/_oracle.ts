// What the broker wrote and what must therefore be true of the agent's work (docs/architecture.md,
// "Invariants"), for end-to-end tests that run the real agent: an oracle of every sealed segment
// ever generated, and checks of the broker directory, the state directory and the bucket
// against it.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { S3Store } from "../../providers/s3/store.ts";

import { appendMessages, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { hex128, initHashes, xxh3_128 } from "../../src/hash.ts";
import { segmentStem } from "../../src/layout/partition.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { readMarker } from "../../src/state/marker.ts";
import {
  fold,
  getSegment,
  type PartitionState,
  segmentsOf,
} from "../../src/state/segment_state.ts";
import { fromUserMetadata } from "../../src/layout/object_metadata.ts";
import type { AgentProcess } from "../fixtures/_agent.ts";

/** A sealed segment as the broker wrote it. */
export interface SealedSegment {
  start: bigint;
  endOffset: bigint;
  size: number;
  checksum: bigint;
  indexSize: number;
  indexChecksum: bigint;
}

/** One generated partition of the test topic. */
export interface OraclePartition {
  partition: number;
  format: FormatName;
  payloadSize: number;
  segmentSize: number;
  /** Every segment ever sealed, by start offset. */
  sealed: Map<bigint, SealedSegment>;
  /** Start of the active (last) segment. */
  active: bigint;
  /** Highest floor seen in the journal so far. */
  floor: bigint;
}

/** The journal of a partition, decoded. */
export interface JournalView {
  state: PartitionState;
  events: number;
  torn: boolean;
  bytes: number;
}

/** Writes segments through the generator and remembers each one's bytes once it is sealed. */
export class BrokerOracle {
  readonly partitions: OraclePartition[];
  /** Objects whose bytes were already read back and matched (objects are immutable). */
  readonly #verifiedObjects = new Set<string>();

  constructor(
    readonly dataDir: string,
    readonly stateDir: string,
    readonly stream: number,
    readonly topic: number,
    partitions: Omit<OraclePartition, "sealed" | "active" | "floor">[],
  ) {
    this.partitions = partitions.map((p) => ({ ...p, sealed: new Map(), active: 0n, floor: -1n }));
  }

  brokerDir(p: OraclePartition): string {
    return partitionDir(this.dataDir, { stream: this.stream, topic: this.topic, ...p });
  }

  stateDirOf(p: OraclePartition): string {
    return join(
      this.stateDir,
      `streams/${this.stream}/topics/${this.topic}/partitions/${p.partition}`,
    );
  }

  /**
   * Appends `messages` to partition `p` (creating it when empty). Each segment is hashed the
   * moment the generator closes it, before its successor exists, so before the agent may touch it.
   */
  async append(p: OraclePartition, messages: number, seed: number): Promise<void> {
    await initHashes();
    const closed: SealedSegment[] = [];
    await appendMessages({
      format: p.format,
      dataDir: this.dataDir,
      stream: this.stream,
      topic: this.topic,
      partition: p.partition,
      messages,
      segmentSize: p.segmentSize,
      payloadSize: p.payloadSize,
      seed,
      onSegment: (s) => {
        const log = Deno.readFileSync(s.logPath);
        const index = Deno.readFileSync(s.indexPath);
        closed.push({
          start: s.startOffset,
          endOffset: s.endOffset,
          size: log.length,
          checksum: xxh3_128(log),
          indexSize: index.length,
          indexChecksum: xxh3_128(index),
        });
      },
    });
    const active = closed.pop()!; // the last segment reported is the active one
    for (const s of closed) p.sealed.set(s.start, s);
    p.active = active.start;
  }

  /** Sealed segments of `p`, oldest first. */
  chain(p: OraclePartition): SealedSegment[] {
    return [...p.sealed.values()].sort((a, b) => (a.start < b.start ? -1 : 1));
  }

  /** Start offsets of the `.log` files in the broker's partition directory. */
  async brokerLogs(p: OraclePartition): Promise<Set<bigint>> {
    const names = await readdir(this.brokerDir(p));
    return new Set(
      names.flatMap((n) => {
        const m = /^(\d{20})\.log$/.exec(n);
        return m ? [BigInt(m[1])] : [];
      }),
    );
  }

  /** The partition's journal, decoded and folded (a torn tail is allowed: the agent cuts it). */
  async journal(p: OraclePartition): Promise<JournalView> {
    await initHashes();
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await readFile(join(this.stateDirOf(p), "journal")));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        return { state: fold([]), events: 0, torn: false, bytes: 0 };
      }
      throw err;
    }
    const decoded = decodeRecords(bytes);
    return {
      state: fold(decoded.events), // throws on an illegal transition, e.g. a floor moving back
      events: decoded.events.length,
      torn: decoded.torn !== undefined,
      bytes: bytes.length,
    };
  }

  /** `iggy/local/{s}/{t}/{p}/{incarnation}-{generation}/` for the journal's incarnation. */
  keyBase(p: OraclePartition, state: PartitionState): string {
    assert.ok(state.incarnation !== undefined, `partition ${p.partition}: no incarnation yet`);
    return `iggy/local/${this.stream}/${this.topic}/${p.partition}/` +
      `${state.incarnation.toString(16).padStart(16, "0")}-${state.generation}/`;
  }

  /**
   * Checks the safety invariants for every partition; throws on the first violation.
   * (a) every sealed segment's bytes are in the broker directory or the store;
   * (b) a missing broker `.log` has a trusted marker and a verified object;
   * (c) evicted segments are a prefix and the active segment is never evicted;
   * (d) the floor never moves back, and everything at or below it is copied.
   * Also: every finished record and every `.log` object matches the segment it names, and the
   * broker directory holds nothing but segment files (`orphanIndexes` counts `.index` files
   * whose `.log` is gone: a kill between the two unlinks leaves one, which Iggy tolerates).
   * @param readBytes also GET each copied segment's objects once and compare their bytes
   */
  async checkInvariants(
    store: S3Store,
    where: string,
    readBytes = true,
  ): Promise<{ evicted: number; copied: number; torn: number; orphanIndexes: number }> {
    let orphanIndexes = 0;
    let evicted = 0;
    let copied = 0;
    let torn = 0;
    for (const p of this.partitions) {
      const at = `${where}: partition ${p.partition}`;
      const view = await this.journal(p);
      if (view.torn) torn++;
      const { state } = view;
      assert.equal(state.generation, 0n, `${at}: unexpected purge generation`);
      // (d) the floor is monotone
      assert.ok(
        state.floor >= p.floor,
        `${at}: floor moved back from ${p.floor} to ${state.floor}`,
      );
      p.floor = state.floor;
      // tierd never writes into a broker partition directory.
      const names = await readdir(this.brokerDir(p));
      const foreign = names.filter((n) => !/^\d{20}\.(log|index)$/.test(n));
      assert.deepEqual(foreign, [], `${at}: files in the broker directory that Iggy never wrote`);
      const present = await this.brokerLogs(p);
      orphanIndexes += names.filter((n) =>
        n.endsWith(".index") && !present.has(BigInt(n.slice(0, 20)))
      ).length;
      const chain = this.chain(p);
      // (c) the active segment stays; the evicted set is a prefix of the chain
      assert.ok(present.has(p.active), `${at}: the active segment ${p.active} is gone`);
      let seenPresent = false;
      for (const s of chain) {
        if (present.has(s.start)) seenPresent = true;
        else {assert.ok(
            !seenPresent,
            `${at}: segment ${s.start} is gone but an older one is still local (not a prefix)`,
          );}
      }
      const records = new Map(segmentsOf(state).map((r) => [r.start, r]));
      const base = state.incarnation === undefined ? undefined : this.keyBase(p, state);
      for (const s of chain) {
        const rec = records.get(s.start);
        const stem = segmentStem(s.start);
        // A running agent may evict a segment between the listing and this read: one gone by
        // now is checked as evicted (its marker and copy came before the unlink).
        const local = present.has(s.start)
          ? await readFile(join(this.brokerDir(p), `${stem}.log`)).then(
            (b) => new Uint8Array(b),
            (err) => {
              if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
              throw err;
            },
          )
          : undefined;
        if (local) {
          // (a) local bytes are the bytes the broker sealed (tierd never writes them)
          assert.equal(xxh3_128(local), s.checksum, `${at}: broker ${stem}.log changed`);
        } else {
          evicted++;
          // (b) no segment leaves the broker without a marker and a verified remote copy
          const markerPath = join(this.stateDirOf(p), `${stem}.remote`);
          const marker = await readMarker(markerPath).catch((err) => {
            throw new assert.AssertionError({
              message: `${at}: segment ${s.start} evicted without a marker: ${err.message}`,
            });
          });
          assert.equal(marker.startOffset, s.start, `${at}: marker start`);
          assert.equal(marker.endOffset, s.endOffset, `${at}: marker end offset`);
          assert.equal(marker.size, BigInt(s.size), `${at}: marker size`);
          assert.equal(marker.logChecksum, s.checksum, `${at}: marker checksum of ${stem}`);
          assert.equal(marker.incarnation, state.incarnation, `${at}: marker incarnation`);
          const kept = await readFile(join(this.stateDirOf(p), `${stem}.index`)).catch(() => {
            throw new assert.AssertionError({ message: `${at}: no kept index copy of ${stem}` });
          });
          assert.equal(xxh3_128(new Uint8Array(kept)), s.indexChecksum, `${at}: kept index`);
          assert.equal(
            rec?.state,
            "COPY_SEGMENT_FINISHED",
            `${at}: evicted segment ${s.start} is ${rec?.state ?? "LOCAL"} in the journal`,
          );
          assert.ok(base !== undefined);
          await this.#checkObject(store, `${base}${stem}`, s, `${at}: evicted`, readBytes);
        }
        if (rec?.state === "COPY_SEGMENT_FINISHED") {
          copied++;
          assert.equal(rec.meta?.checksum, s.checksum, `${at}: journaled checksum`);
          assert.equal(rec.meta?.endOffset, s.endOffset, `${at}: journaled end offset`);
          if (rec.evicted) {
            assert.ok(!present.has(s.start), `${at}: ${stem} recorded evicted, still local`);
          }
          if (present.has(s.start)) {
            await this.#checkObject(store, `${base}${stem}`, s, `${at}: copied`, readBytes);
          }
        }
        // (d) the floor covers only copied segments
        if (s.endOffset <= state.floor) {
          assert.equal(
            rec?.state,
            "COPY_SEGMENT_FINISHED",
            `${at}: floor ${state.floor} covers ${s.start}..${s.endOffset}, which is ` +
              (rec?.state ?? "LOCAL"),
          );
        }
      }
      for (const r of records.values()) {
        if (r.state === "COPY_SEGMENT_FINISHED") {
          assert.ok(
            p.sealed.has(r.start),
            `${at}: finished record for unsealed segment ${r.start}`,
          );
        }
      }
      // Every complete `.log` object describes the sealed segment of its name, byte for byte.
      if (base !== undefined) {
        for (const o of await listBounded(store, base)) {
          const m = /(\d{20})\.(log|index)$/.exec(o.key);
          assert.ok(m, `${at}: unexpected object ${o.key}`);
          const s = p.sealed.get(BigInt(m[1]));
          assert.ok(s, `${at}: object ${o.key} for a segment that is not sealed`);
          // An upload in flight may have put one of the two; each alone must still be right.
          const stemKey = o.key.slice(0, -(m[2].length + 1));
          if (m[2] === "log") await this.#checkLog(store, stemKey, s, at);
          else await this.#checkIndex(store, stemKey, s, at);
        }
      }
    }
    return { evicted, copied, torn, orphanIndexes };
  }

  /** HEADs (and, once, GETs) a segment's two objects and compares them with the oracle. */
  async #checkObject(
    store: S3Store,
    stemKey: string,
    s: SealedSegment,
    at: string,
    readBytes: boolean,
  ): Promise<void> {
    await this.#checkLog(store, stemKey, s, at);
    await this.#checkIndex(store, stemKey, s, at);
    if (!readBytes || this.#verifiedObjects.has(stemKey)) return;
    const log = await store.get(`${stemKey}.log`);
    assert.equal(xxh3_128(log.bytes), s.checksum, `${at}: ${stemKey}.log bytes`);
    const index = await store.get(`${stemKey}.index`);
    assert.equal(xxh3_128(index.bytes), s.indexChecksum, `${at}: ${stemKey}.index bytes`);
    this.#verifiedObjects.add(stemKey);
  }

  async #checkLog(store: S3Store, stemKey: string, s: SealedSegment, at: string): Promise<void> {
    const head = await store.head(`${stemKey}.log`).catch((err) => {
      throw new assert.AssertionError({ message: `${at}: ${stemKey}.log: ${err.message}` });
    });
    assert.equal(head.size, s.size, `${at}: ${stemKey}.log size`);
    const meta = fromUserMetadata(`${stemKey}.log`, head.metadata);
    assert.equal(meta.checksum, s.checksum, `${at}: ${stemKey}.log xxh3-128 metadata`);
    assert.equal(meta.endOffset, s.endOffset, `${at}: ${stemKey}.log end-offset metadata`);
    assert.equal(meta.indexSize, s.indexSize, `${at}: ${stemKey}.log index-size metadata`);
  }

  async #checkIndex(store: S3Store, stemKey: string, s: SealedSegment, at: string): Promise<void> {
    const head = await store.head(`${stemKey}.index`).catch((err) => {
      throw new assert.AssertionError({ message: `${at}: ${stemKey}.index: ${err.message}` });
    });
    assert.equal(head.size, s.indexSize, `${at}: ${stemKey}.index size`);
    assert.equal(head.metadata["xxh3-128"], hex128(s.indexChecksum), `${at}: ${stemKey}.index`);
  }

  /** Forgets which objects were read back, so the next check GETs every one again. */
  forgetVerified(): void {
    this.#verifiedObjects.clear();
  }
}

/**
 * Waits until every sealed segment is copied, no copy or cleanup is in flight, and neither the
 * journals nor the broker directories changed for a second.
 */
export async function settle(oracle: BrokerOracle, agent: AgentProcess, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let lastSnapshot = "";
  let quietSince = Date.now();
  for (;;) {
    let done = true;
    let snapshot = "";
    for (const p of oracle.partitions) {
      const view = await oracle.journal(p);
      const logs = await oracle.brokerLogs(p);
      snapshot += `${p.partition}:${view.bytes}:${[...logs].join(",")};`;
      for (const s of oracle.chain(p)) {
        if (
          getSegment(view.state, view.state.generation, s.start)?.state !== "COPY_SEGMENT_FINISHED"
        ) {
          done = false;
        }
      }
    }
    if (snapshot !== lastSnapshot) {
      lastSnapshot = snapshot;
      quietSince = Date.now();
    }
    if (done && Date.now() - quietSince >= 1000) return;
    if (Date.now() > deadline) {
      throw new Error(
        `the agent did not settle within ${timeoutMs} ms; journals:\n` +
          (await Promise.all(oracle.partitions.map(async (p) => {
            const { state } = await oracle.journal(p);
            return `p${p.partition}: floor ${state.floor}; ` +
              [...(state.segments.get(state.generation)?.values() ?? [])]
                .filter((r) => r.state !== "COPY_SEGMENT_FINISHED")
                .map((r) => `${r.start}=${r.state}${r.deleteCause ? `(${r.deleteCause})` : ""}`)
                .join(" ");
          }))).join("\n") + `\nagent output tail:\n${agent.output().slice(-3000)}`,
      );
    }
    const exited = await Promise.race([
      agent.status.then(() => true),
      sleep(250).then(() => false),
    ]);
    if (exited) throw new Error(`the agent exited while settling:\n${agent.output().slice(-3000)}`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the journals say about leftover multipart uploads (for a failure message). */
export async function uploadHistory(
  oracle: BrokerOracle,
  uploads: { key: string; uploadId: string; initiated?: Date }[],
): Promise<string> {
  const out: string[] = [];
  for (const u of uploads) {
    const m = /\/(\d+)\/[0-9a-f]{16}-\d+\/(\d{20})\.log$/.exec(u.key);
    const p = oracle.partitions.find((p) => String(p.partition) === m?.[1]);
    if (!m || !p) {
      out.push(`${u.key}: not a segment key`);
      continue;
    }
    const bytes = await Deno.readFile(join(oracle.stateDirOf(p), "journal"));
    const history = decodeRecords(bytes).events
      .filter((e) => "segment" in e && e.segment === BigInt(m[2]))
      .map((e) =>
        e.type === "multipart_started"
          ? `${e.type}(${e.uploadId === u.uploadId ? "THIS upload" : "another upload"})`
          : e.type
      );
    out.push(
      `${u.key} upload initiated ${u.initiated?.toISOString()}: journal: ${history.join(" → ")}`,
    );
  }
  return out.join("\n");
}
