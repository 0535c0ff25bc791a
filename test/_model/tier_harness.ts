// Shared pieces of the tier worker's model, bad-state and broker tests: a store wrapper that freezes the agent at a chosen request (a crash), consumer offset files as the
// broker writes them, the durable journal state and the remote keys it names, and observers and
// loggers that record.
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ObjectStore } from "../../providers/types.ts";
import type { Config } from "../../src/config/schema.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import type { PartitionId } from "../../src/layout/partition.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { emptyState, fold, type PartitionState } from "../../src/state/segment_state.ts";
import { journalPath as journalFile, partitionStateDir } from "../../src/layout/state_paths.ts";
import type { TierObserver } from "../../src/tier/observer.ts";

/**
 * A temporary directory on a memory filesystem when there is one (`/dev/shm`): the model runs
 * thousands of fsyncs that prove nothing there, and disk fsyncs would make it slow. Falls back
 * to the system temp dir.
 */
export async function scratchDir(
  label = "tierd",
): Promise<{ path: string; cleanup(): Promise<void> }> {
  let base = tmpdir();
  try {
    if ((await stat("/dev/shm")).isDirectory()) base = "/dev/shm";
  } catch {
    // no memory filesystem: use the temp dir
  }
  const path = await mkdtemp(join(base, `${label}-`));
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}

/** The journal file of a partition under `stateDir`. */
export function journalPath(stateDir: string, id: PartitionId): string {
  return journalFile(partitionStateDir(stateDir, id));
}

/** The partition state as it is on disk (what a restart would replay), valid prefix only. */
export async function durableState(stateDir: string, id: PartitionId): Promise<PartitionState> {
  await initHashes();
  let bytes: Uint8Array;
  try {
    bytes = await readFile(journalPath(stateDir, id));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return emptyState();
    throw err;
  }
  return fold(decodeRecords(bytes).events);
}

/**
 * The remote keys of segment `start` of partition `id` (key prefix `iggy`), in the incarnation
 * and generation its durable journal holds now.
 */
export async function remoteKeys(
  config: Config,
  id: PartitionId,
  start: bigint,
): Promise<{ log: string; index: string }> {
  const state = await durableState(config.agent.state_dir, id);
  return segmentKeys({
    ...id,
    prefix: "iggy",
    clusterId: config.agent.cluster_id,
    incarnation: state.incarnation!,
    generation: state.generation,
  }, start);
}

/**
 * Writes a consumer (or group) offset file as the broker does: 8 bytes (u64 LE) for Iggy 0.8,
 * 16 bytes (u64 LE offset + XXH3-64 of it) for 0.9. `corrupt` flips a checksum bit (0.9) or
 * writes 5 bytes (0.8), which no broker would leave.
 */
export async function writeConsumerOffset(
  partitionDir: string,
  o: {
    kind?: "consumers" | "groups";
    id: number;
    offset: bigint;
    format: FormatName;
    corrupt?: boolean;
  },
): Promise<string> {
  await initHashes();
  const dir = join(partitionDir, "offsets", o.kind ?? "consumers");
  await mkdir(dir, { recursive: true });
  let bytes: Uint8Array;
  if (o.format === "iggy-0.8") {
    bytes = new Uint8Array(o.corrupt ? 5 : 8);
    if (!o.corrupt) new DataView(bytes.buffer).setBigUint64(0, o.offset, true);
  } else {
    bytes = new Uint8Array(16);
    const view = new DataView(bytes.buffer);
    view.setBigUint64(0, o.offset, true);
    view.setBigUint64(8, xxh3_64(bytes.subarray(0, 8)) ^ (o.corrupt ? 1n : 0n), true);
  }
  const path = join(dir, String(o.id));
  await writeFile(path, bytes);
  return path;
}

/** Counts what a worker reported through its observer. */
export interface RecordedObserver extends TierObserver {
  lost: number;
  evictedCount: number;
  remoteDeletedCount: number;
  quarantined: { path: string; reason: string }[];
  tornTails: string[];
  /** Markers trusted from the clean-stop record and not read yet (the gauge's value). */
  unread: number;
  /** Every `evictionBlocked` call, in order. */
  blocked: { partition: string; reason: string | undefined }[];
}

/** An observer that records every hook call. */
export function recordingObserver(): RecordedObserver {
  const o: RecordedObserver = {
    lost: 0,
    evictedCount: 0,
    remoteDeletedCount: 0,
    quarantined: [],
    tornTails: [],
    unread: 0,
    blocked: [],
    lostBeforeUpload: (n) => void (o.lost += n),
    evicted: (n) => void (o.evictedCount += n),
    remoteDeleted: (n) => void (o.remoteDeletedCount += n),
    markerQuarantined: (path, reason) => void o.quarantined.push({ path, reason }),
    journalTornTail: (path) => void o.tornTails.push(path),
    markersUnread: (delta) => void (o.unread += delta),
    evictionBlocked: (id, reason) =>
      void o.blocked.push({ partition: `${id.stream}/${id.topic}/${id.partition}`, reason }),
  };
  return o;
}

/** A parsed log line. */
export type LogLine = { level: string; msg: string } & Record<string, unknown>;

/** A logger whose lines are kept (parsed) for assertions. */
export function capturingLogger(level: "debug" | "info" | "warn" = "info"): {
  logger: Logger;
  lines: LogLine[];
} {
  const lines: LogLine[] = [];
  const logger = createLogger({ level, write: (l) => void lines.push(JSON.parse(l)) });
  return { logger, lines };
}

/** The error a frozen store call fails with once the test lets the "crashed" agent go. */
export function crashError(): DOMException {
  return new DOMException("the agent crashed here (test)", "AbortError");
}

/**
 * Delegates to a store, and can freeze: once armed, the request after `after` more requests
 * (optionally applied to the store first) never answers, and neither does any later one —
 * the agent stops there as if the process died. `release()` then fails every frozen call, so
 * the dead agent's pass can wind down after its journals were closed under it.
 */
export class FreezingStore implements ObjectStore {
  readonly kind = "freezing";
  #inner: ObjectStore;
  #countdown?: number;
  #applyFirst = false;
  #frozen = false;
  #dead = false;
  #waiting: (() => void)[] = [];
  #onFreeze?: () => void;
  #op?: keyof ObjectStore;

  constructor(inner: ObjectStore) {
    this.#inner = inner;
  }

  /** True once a request froze. */
  get frozen(): boolean {
    return this.#frozen;
  }

  /**
   * Freezes at the request after `after` more (counting only `op` requests when given); calls
   * `onFreeze` when it happens.
   */
  arm(after: number, applyFirst: boolean, onFreeze: () => void, op?: keyof ObjectStore): void {
    this.#countdown = after;
    this.#applyFirst = applyFirst;
    this.#onFreeze = onFreeze;
    this.#op = op;
  }

  disarm(): void {
    this.#countdown = undefined;
    this.#onFreeze = undefined;
  }

  /** Fails every frozen call and every later one. */
  release(): void {
    this.#dead = true;
    for (const fail of this.#waiting.splice(0)) fail();
  }

  async #call<T>(op: keyof ObjectStore, serve: () => Promise<T>): Promise<T> {
    if (this.#dead) throw crashError();
    const counts = this.#op === undefined || this.#op === op;
    if (!this.#frozen && counts && this.#countdown !== undefined && this.#countdown-- <= 0) {
      this.#frozen = true;
      if (this.#applyFirst) await serve().catch(() => {});
      this.#onFreeze?.();
    }
    if (this.#frozen) {
      return await new Promise<T>((_, reject) => this.#waiting.push(() => reject(crashError())));
    }
    return await serve();
  }

  put: ObjectStore["put"] = (k, b, o) => this.#call("put", () => this.#inner.put(k, b, o));
  get: ObjectStore["get"] = (k, o) => this.#call("get", () => this.#inner.get(k, o));
  head: ObjectStore["head"] = (k, o) => this.#call("head", () => this.#inner.head(k, o));
  deleteMany: ObjectStore["deleteMany"] = (k, o) =>
    this.#call("deleteMany", () => this.#inner.deleteMany(k, o));
  list: ObjectStore["list"] = (p, o) => this.#call("list", () => this.#inner.list(p, o));
  createMultipart: ObjectStore["createMultipart"] = (k, o) =>
    this.#call("createMultipart", () => this.#inner.createMultipart(k, o));
  putPart: ObjectStore["putPart"] = (k, u, n, b, o) =>
    this.#call("putPart", () => this.#inner.putPart(k, u, n, b, o));
  completeMultipart: ObjectStore["completeMultipart"] = (k, u, p, o) =>
    this.#call("completeMultipart", () => this.#inner.completeMultipart(k, u, p, o));
  abortMultipart: ObjectStore["abortMultipart"] = (k, u, o) =>
    this.#call("abortMultipart", () => this.#inner.abortMultipart(k, u, o));
  listMultipartUploads: ObjectStore["listMultipartUploads"] = (p, o) =>
    this.#call("listMultipartUploads", () => this.#inner.listMultipartUploads(p, o));
}
