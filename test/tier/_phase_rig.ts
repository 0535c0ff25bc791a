// A rig for the tier phases one at a time: a partition of real generated segments, a config on a
// temp dir, a `RetryingStore` over a `SimStore` on a fake clock, a recording observer and logger,
// and the partition's `PartitionLedger` (with an incarnation recorded unless asked otherwise).
// Each phase is then called with explicit inputs, without a `TierWorker` around it.
import { readFile } from "node:fs/promises";
import { systemClock } from "../../src/base/clock.ts";
import { Deadline } from "../../providers/retry.ts";
import {
  type RetryEvent,
  RetryingStore,
  type RetryingStoreOptions,
} from "../../providers/retrying_store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config, TopicConfig } from "../../src/config/schema.ts";
import { tieredTopic } from "../../src/config/topics.ts";
import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes, xxh3_128 } from "../../src/hash.ts";
import type { PartitionId } from "../../src/layout/partition.ts";
import { factsFromBounds, type SegmentFacts } from "../../src/layout/segment_facts.ts";
import { journalPath } from "../../src/layout/state_paths.ts";
import { type DiscoveredPartition, discoverPartitions } from "../../src/partition/discover.ts";
import { newIncarnation } from "../../src/partition/incarnation.ts";
import type { SegmentFiles } from "../../src/partition/segments.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { type KeySpace, PartitionLedger } from "../../src/tier/partition_ledger.ts";
import { listLocal, type PhaseContext } from "../../src/tier/phase.ts";
import { testConfig } from "../_config.ts";
import { FakeClock } from "../_fake_clock.ts";
import {
  capturingLogger,
  type LogLine,
  type RecordedObserver,
  recordingObserver,
  scratchDir,
} from "../_model/tier_harness.ts";
import { copyFinishedEvent } from "../../src/state/events.ts";

await initHashes();

export const ID: PartitionId = { stream: 0, topic: 0, partition: 0 };
export const PREFIX = "iggy";

/** What a rig is built from; everything has a small default. */
export interface RigOptions {
  /** @default "iggy-0.9" */
  format?: FormatName;
  /** @default 600 (about five 16 KiB segments of 100-byte payloads) */
  messages?: number;
  /** @default 16 KiB */
  segmentSize?: number;
  /** @default 100 */
  payloadSize?: number;
  /** Record an incarnation in the ledger (as boot would). @default true */
  incarnation?: boolean;
  /** Wraps the sim store (faults, counting) under the retries. */
  wrap?: (sim: SimStore) => ObjectStore;
  /** Retry options other than the root and the clock. */
  retry?: Omit<RetryingStoreOptions, "root" | "clock">;
  /** Changes the config before anything is built from it. */
  config?: (config: Config) => void;
}

/** An observer that also records the stall gauge. */
export type RigObserver = RecordedObserver & { stalls: (0 | 1)[] };

/** One partition with everything its phases need. */
export interface PhaseRig {
  config: Config;
  format: FormatName;
  /** Time moves only when a test says so (`advance`, `runUntil`). */
  clock: FakeClock;
  sim: SimStore;
  store: RetryingStore;
  /** Every retry the store made. */
  retries: RetryEvent[];
  ctx: PhaseContext;
  observer: RigObserver;
  logs: LogLine[];
  ledger: PartitionLedger;
  part: DiscoveredPartition;
  /** The broker's partition directory. */
  dir: string;
  segments: GeneratedSegment[];
  topic: TopicConfig;
  keySpace: KeySpace;
  /** The partition's local segments now, as the phases list them. */
  local(): Promise<SegmentFiles[]>;
  /** The events in the journal file, in order (what a restart replays). */
  events(): Promise<JournalEvent[]>;
  /** Closes and reopens the ledger (a restart); `ledger` is the new one afterwards. */
  reopen(): Promise<PartitionLedger>;
  /** Log lines with this message. */
  logged(msg: string): LogLine[];
  cleanup(): Promise<void>;
}

/** Builds a rig (see {@link RigOptions}). */
export async function phaseRig(o: RigOptions = {}): Promise<PhaseRig> {
  const tmp = await scratchDir("tierd-phase");
  const format = o.format ?? "iggy-0.9";
  const config = testConfig({ dir: tmp.path, backend: "sim", uploadTimeout: "3 s" });
  o.config?.(config);
  const segments = await generatePartition({
    format,
    dataDir: config.agent.data_dir,
    ...ID,
    messages: o.messages ?? 600,
    segmentSize: o.segmentSize ?? 16 * 1024,
    payloadSize: o.payloadSize ?? 100,
  });
  // Ahead of the real clock, so the files just written already count as quiet (sealed).
  const clock = new FakeClock(systemClock.now() + 600_000);
  const sim = new SimStore({ clock });
  const retries: RetryEvent[] = [];
  const store = new RetryingStore(o.wrap ? o.wrap(sim) : sim, {
    root: Deadline.after(Infinity, undefined, { clock }),
    clock,
    rng: () => 0.5,
    maxBackoffMs: config.tiered_storage.upload_loop_backoff_max,
    ...o.retry,
    onRetry: (e) => {
      retries.push(e);
      o.retry?.onRetry?.(e);
    },
  });
  const { logger, lines } = capturingLogger("info");
  const stalls: (0 | 1)[] = [];
  const observer = Object.assign(recordingObserver(), {
    stalls,
    stalled: (v: 0 | 1) => void stalls.push(v),
  });
  const ctx: PhaseContext = {
    config,
    store,
    clock,
    log: logger.child({ partition: "0/0/0" }),
    observer,
  };
  const [part] = await discoverPartitions(config.agent.data_dir);
  const keySpace = { prefix: PREFIX, clusterId: config.agent.cluster_id };
  const rig: PhaseRig = {
    config,
    format,
    clock,
    sim,
    store,
    retries,
    ctx,
    observer,
    logs: lines,
    ledger: await PartitionLedger.open(config.agent.state_dir, ID, keySpace),
    part,
    dir: part.dir,
    segments,
    topic: { ...tieredTopic(config, ID)! },
    keySpace,
    local: () => listLocal(ctx, part.dir),
    async events() {
      const bytes = await readFile(journalPath(rig.ledger.stateDir));
      return decodeRecords(bytes).events;
    },
    async reopen() {
      await rig.ledger.close();
      rig.ledger = await PartitionLedger.open(config.agent.state_dir, ID, keySpace);
      return rig.ledger;
    },
    logged: (msg) => lines.filter((l) => l.msg === msg),
    async cleanup() {
      await rig.ledger.close().catch(() => {});
      await tmp.cleanup();
    },
  };
  if (o.incarnation ?? true) {
    await rig.ledger.record({
      type: "incarnation",
      incarnation: newIncarnation(),
      device: part.device,
      inode: part.inode,
      at: clock.now(),
    });
  }
  return rig;
}

/** The facts of a generated segment's bytes: what a verified copy of it journals. */
export async function factsOf(seg: GeneratedSegment): Promise<SegmentFacts> {
  return factsFromBounds(seg, xxh3_128(await readFile(seg.logPath)));
}

/**
 * Journals segment `seg` as copied (copy_started, copy_finished with its facts) without
 * touching the store: for phases that only read the journal.
 */
export async function recordCopied(r: PhaseRig, seg: GeneratedSegment): Promise<void> {
  const generation = r.ledger.state.generation;
  await r.ledger.record(
    { type: "copy_started", segment: seg.startOffset, generation, at: r.clock.now() },
    copyFinishedEvent(seg.startOffset, generation, await factsOf(seg), r.clock.now()),
  );
}

/** Journals segment `start` as a failed copy (copy_started, dangling). */
export async function recordDangling(r: PhaseRig, start: bigint, reason = "test"): Promise<void> {
  const generation = r.ledger.state.generation;
  await r.ledger.record(
    { type: "copy_started", segment: start, generation, at: r.clock.now() },
    { type: "dangling", segment: start, generation, reason, at: r.clock.now() },
  );
}
