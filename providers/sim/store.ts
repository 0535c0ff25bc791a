// An in-memory object store with seeded fault injection: the store the reliability
// tests drive. It follows S3's rules (see ../_rules.ts and ../_ranges.ts) and fails with the same
// typed errors a real provider gives, so code that survives it survives a flaky bucket.
import { checkKey, compareUtf8, decodeToken, encodeToken, pageSize } from "../key_rules.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { seededRandom } from "../../src/base/rng.ts";
import { checksumOf } from "../checksum.ts";
import {
  checkMetadata,
  checkPartNumber,
  checkPutConditions,
  md5Hex,
  MIN_PART_SIZE,
  multipartEtag,
  planCompletion,
  versionMismatch,
} from "../_rules.ts";
import { resolveRange } from "../_ranges.ts";
import { type Clock, sleep, systemClock } from "../../src/base/clock.ts";
import {
  type CompletedPart,
  type DeleteFailure,
  type GetOptions,
  type GetResult,
  type HeadOptions,
  type ListOptions,
  type ListPage,
  type MultipartUpload,
  type ObjectHead,
  type ObjectStore,
  type PutOptions,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "../types.ts";

/** The faults a {@linkcode SimStore} injects; rates are probabilities per request. */
export interface SimFaults {
  /** Each request waits uniformly between these bounds (ms) before it is served. */
  latencyMs: [number, number];
  /** Requests answered `Throttled` (503 SlowDown). */
  throttleRate: number;
  /** Requests answered `Transport` (500 InternalError), without effect. */
  serverErrorRate: number;
  /**
   * Requests whose connection resets (`Transport`). A write may or may not have taken effect:
   * half of the reset writes are applied first.
   */
  resetRate: number;
  /** Gets whose body arrives slowly: `slowBodyMs` more after the request is served. */
  slowBodyRate: number;
  slowBodyMs: number;
  /** Every request fails `Transport` at once, like a store outage. */
  unavailable: boolean;
}

/** The operations of the store, for {@linkcode SimStore.requestCount}. */
export type SimOp =
  | "put"
  | "get"
  | "head"
  | "deleteMany"
  | "list"
  | "createMultipart"
  | "putPart"
  | "completeMultipart"
  | "abortMultipart"
  | "listMultipartUploads";

/** A stored object, as tests see it through {@linkcode SimStore.objects}. */
export interface SimObject {
  readonly bytes: Uint8Array;
  readonly metadata: Readonly<UserMetadata>;
  readonly contentType?: string;
  readonly etag: string;
  /** Its version: `sim-v{n}`, counting the store's successful writes (see `PutOptions.ifMatch`). */
  readonly version: string;
  readonly lastModified: Date;
}

/** A multipart upload in progress, as tests see it through {@linkcode SimStore.uploads}. */
export interface SimUpload {
  readonly key: string;
  readonly uploadId: string;
  readonly initiated: Date;
  readonly metadata: Readonly<UserMetadata>;
  readonly contentType?: string;
  readonly parts: ReadonlyMap<number, { readonly bytes: Uint8Array; readonly etag: string }>;
}

/** Options of {@linkcode SimStore}. */
export interface SimStoreOptions {
  /** Seeds the fault dice: the same seed and requests give the same faults. @default 1 */
  seed?: number;
  /** Faults from the start; all off by default. */
  faults?: Partial<SimFaults>;
  /** Where latency and slow bodies wait, and what upload and modification times read. @default systemClock */
  clock?: Clock;
  /** The smallest part but the last a completion accepts. @default 5 MiB, like S3 */
  minPartSize?: number;
}

const NO_FAULTS: SimFaults = {
  latencyMs: [0, 0],
  throttleRate: 0,
  serverErrorRate: 0,
  resetRate: 0,
  slowBodyRate: 0,
  slowBodyMs: 0,
  unavailable: false,
};

interface MutableUpload extends SimUpload {
  parts: Map<number, { bytes: Uint8Array; etag: string }>;
}

/**
 * An in-memory, deterministic {@linkcode ObjectStore} with seeded fault injection.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Deadline, withRetry } from "../retry.ts";
 *
 * const sim = new SimStore({ seed: 7, faults: { throttleRate: 0.5 } });
 * const deadline = Deadline.after(60_000);
 * await withRetry((signal) => sim.put("k", new Uint8Array(8), { signal }), { deadline, baseMs: 1 });
 * deadline.dispose();
 * assert.ok(sim.requestCount("put") >= 1); // attempts, faulted ones included
 * assert.equal(sim.objects.get("k")?.bytes.length, 8); // the oracle: what the store holds
 * ```
 */
export class SimStore implements ObjectStore {
  readonly kind = "sim";
  readonly #objects = new Map<string, SimObject>();
  readonly #uploads = new Map<string, MutableUpload>();
  readonly #counts = new Map<SimOp, number>();
  readonly #rng: () => number;
  readonly #clock: Clock;
  readonly #minPartSize: number;
  #faults: SimFaults;
  #sortedKeys?: string[];
  #nextUpload = 0;
  #nextVersion = 0;

  constructor(options: SimStoreOptions = {}) {
    this.#rng = seededRandom(options.seed ?? 1);
    this.#faults = { ...NO_FAULTS, ...options.faults };
    this.#clock = options.clock ?? systemClock;
    this.#minPartSize = options.minPartSize ?? MIN_PART_SIZE;
  }

  /** The faults in force now. */
  get faults(): Readonly<SimFaults> {
    return this.#faults;
  }

  /** Changes some faults; the others keep their values. */
  setFaults(faults: Partial<SimFaults>): void {
    this.#faults = { ...this.#faults, ...faults };
  }

  /** Starts or ends an outage: every request fails `Transport`. */
  setUnavailable(unavailable: boolean): void {
    this.setFaults({ unavailable });
  }

  /** Requests received (faulted ones included) for `op`, or for all operations. */
  requestCount(op?: SimOp): number {
    if (op) return this.#counts.get(op) ?? 0;
    let total = 0;
    for (const n of this.#counts.values()) total += n;
    return total;
  }

  /** Sets every request counter back to zero. */
  resetCounts(): void {
    this.#counts.clear();
  }

  /** The stored objects by key: the oracle for tests. Do not mutate the bytes. */
  get objects(): ReadonlyMap<string, SimObject> {
    return this.#objects;
  }

  /** The multipart uploads in progress by upload id. */
  get uploads(): ReadonlyMap<string, SimUpload> {
    return this.#uploads;
  }

  /**
   * Stores the object. `ifAbsent` and `ifMatch` are decided when the request is served, after
   * its latency and faults, so concurrent conditional writes race as on a real store.
   */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutResult> {
    checkKey(key, "put");
    checkPutConditions(options, key);
    checkMetadata(options.metadata, "put", key);
    const bytes = body.slice();
    return await this.#request("put", options.signal, { mutates: true }, () => {
      const etag = md5Hex(bytes);
      return this.#store(key, bytes, etag, options.metadata, options.contentType, options);
    });
  }

  async get(key: string, options: GetOptions = {}): Promise<GetResult> {
    return await this.#request("get", options.signal, { slowBody: true }, () => {
      const object = this.#find(key, "get");
      const [start, end] = resolveRange(options.range, object.bytes.length, key);
      return {
        bytes: object.bytes.slice(start, end),
        size: object.bytes.length,
        etag: object.etag,
        version: object.version,
      };
    });
  }

  /**
   * The object's size, ETag and metadata; with `checksums`, a CRC-64/NVME of its bytes now, as
   * an S3 that kept one reports it (bytes a test changed in place show up as a mismatch).
   */
  async head(key: string, options: HeadOptions = {}): Promise<ObjectHead> {
    const { head, bytes } = await this.#request("head", options.signal, {}, () => {
      const object = this.#find(key, "head");
      const head: ObjectHead = {
        key,
        size: object.bytes.length,
        etag: object.etag,
        version: object.version,
        lastModified: object.lastModified,
        metadata: { ...object.metadata },
      };
      return { head, bytes: object.bytes };
    });
    if (options.checksums) {
      head.checksums = [{ ...(await checksumOf("crc64nvme", bytes)), type: "full" }];
    }
    return head;
  }

  async deleteMany(
    keys: string[],
    options: { signal?: AbortSignal } = {},
  ): Promise<DeleteFailure[]> {
    return await this.#request("deleteMany", options.signal, { mutates: true }, () => {
      const failures: DeleteFailure[] = [];
      for (const key of keys) {
        try {
          checkKey(key, "deleteMany");
        } catch (err) {
          failures.push({ key, error: err as StoreError });
          continue;
        }
        if (this.#objects.delete(key)) this.#sortedKeys = undefined;
      }
      return failures;
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const after = options.continuationToken === undefined
      ? undefined
      : decodeToken(options.continuationToken, "list");
    const limit = pageSize(options.maxKeys);
    return await this.#request("list", options.signal, {}, () => {
      const keys = this.#sortedKeys ??= [...this.#objects.keys()].sort(compareUtf8);
      const from = after !== undefined && compareUtf8(after, prefix) >= 0 ? after : prefix;
      const page: ListPage = { objects: [] };
      for (let i = lowerBound(keys, from); i < keys.length; i++) {
        const key = keys[i];
        if (key === after) continue;
        if (!key.startsWith(prefix)) break;
        if (page.objects.length === limit) {
          page.continuationToken = encodeToken(page.objects[limit - 1].key);
          break;
        }
        const object = this.#objects.get(key)!;
        page.objects.push({
          key,
          size: object.bytes.length,
          etag: object.etag,
          lastModified: object.lastModified,
        });
      }
      return page;
    });
  }

  async createMultipart(
    key: string,
    options: { metadata?: UserMetadata; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<string> {
    checkKey(key, "createMultipart");
    checkMetadata(options.metadata, "createMultipart", key);
    return await this.#request("createMultipart", options.signal, { mutates: true }, () => {
      const uploadId = `sim-${(++this.#nextUpload).toString().padStart(8, "0")}`;
      this.#uploads.set(uploadId, {
        key,
        uploadId,
        initiated: new Date(this.#clock.now()),
        metadata: { ...options.metadata },
        contentType: options.contentType,
        parts: new Map(),
      });
      return uploadId;
    });
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options: { signal?: AbortSignal } = {},
  ): Promise<CompletedPart> {
    checkPartNumber(partNumber, "putPart", key);
    const bytes = body.slice();
    return await this.#request("putPart", options.signal, { mutates: true }, () => {
      const upload = this.#findUpload(key, uploadId, "putPart");
      const etag = md5Hex(bytes);
      upload.parts.set(partNumber, { bytes, etag });
      return { partNumber, etag };
    });
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: CompletedPart[],
    options: { ifAbsent?: boolean; signal?: AbortSignal } = {},
  ): Promise<PutResult> {
    return await this.#request("completeMultipart", options.signal, { mutates: true }, () => {
      const upload = this.#findUpload(key, uploadId, "completeMultipart");
      const plan = planCompletion(key, parts, (n) => {
        const part = upload.parts.get(n);
        return part && { size: part.bytes.length, etag: part.etag };
      }, this.#minPartSize);
      const bytes = concatBytes(plan.map(({ partNumber }) => upload.parts.get(partNumber)!.bytes));
      const etag = multipartEtag(plan.map((part) => part.etag));
      const result = this.#store(key, bytes, etag, upload.metadata, upload.contentType, options);
      // Like S3, a refused conditional completion leaves the upload to be retried or aborted.
      if (result.status === "Created") this.#uploads.delete(uploadId);
      return result;
    });
  }

  async abortMultipart(
    key: string,
    uploadId: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    return await this.#request("abortMultipart", options.signal, { mutates: true }, () => {
      if (this.#uploads.get(uploadId)?.key === key) this.#uploads.delete(uploadId);
    });
  }

  async listMultipartUploads(
    prefix: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<MultipartUpload[]> {
    return await this.#request(
      "listMultipartUploads",
      options.signal,
      {},
      () =>
        [...this.#uploads.values()]
          .filter((upload) => upload.key.startsWith(prefix))
          .map(({ key, uploadId, initiated }) => ({ key, uploadId, initiated }))
          .sort((a, b) => compareUtf8(a.key, b.key) || compareUtf8(a.uploadId, b.uploadId)),
    );
  }

  async close(): Promise<void> {}

  #store(
    key: string,
    bytes: Uint8Array,
    etag: string,
    metadata: UserMetadata | undefined,
    contentType: string | undefined,
    conditions: { ifAbsent?: boolean; ifMatch?: string },
  ): PutResult {
    const existing = this.#objects.get(key);
    if (conditions.ifAbsent && existing) return { status: "AlreadyExists" };
    const { ifMatch } = conditions;
    if (ifMatch !== undefined && existing?.version !== ifMatch) {
      throw versionMismatch(key, {
        ifMatch,
        why: existing ? `it is at ${existing.version}` : "the key does not exist",
        status: 412,
        code: "PreconditionFailed",
      });
    }
    if (!existing) this.#sortedKeys = undefined;
    const version = `sim-v${++this.#nextVersion}`;
    this.#objects.set(key, {
      bytes,
      metadata: { ...metadata },
      contentType,
      etag,
      version,
      lastModified: new Date(this.#clock.now()),
    });
    return { status: "Created", etag, version };
  }

  #find(key: string, op: SimOp): SimObject {
    const object = this.#objects.get(key);
    if (!object) {
      throw new StoreError("NotFound", `no object ${JSON.stringify(key)}`, {
        op,
        key,
        status: 404,
        code: "NoSuchKey",
      });
    }
    return object;
  }

  #findUpload(key: string, uploadId: string, op: SimOp): MutableUpload {
    const upload = this.#uploads.get(uploadId);
    if (!upload || upload.key !== key) {
      throw new StoreError("NotFound", `no multipart upload ${uploadId} for ${key}`, {
        op,
        key,
        status: 404,
        code: "NoSuchUpload",
      });
    }
    return upload;
  }

  /**
   * Serves one request through the fault dice. Every request draws the same number of dice in
   * the same order, so a seed replays exactly whatever the faults turn out to be.
   */
  async #request<T>(
    op: SimOp,
    signal: AbortSignal | undefined,
    how: { mutates?: boolean; slowBody?: boolean },
    serve: () => T,
  ): Promise<T> {
    this.#counts.set(op, (this.#counts.get(op) ?? 0) + 1);
    signal?.throwIfAborted();
    const f = this.#faults;
    const [latency, throttle, server, reset, applied, slow] = Array.from({ length: 6 }, this.#rng);
    if (f.unavailable) {
      throw new StoreError("Transport", "store unavailable: connection refused", {
        op,
        code: "ECONNREFUSED",
      });
    }
    const [min, max] = f.latencyMs;
    const waitMs = min + latency * (max - min);
    if (waitMs > 0) await sleep(waitMs, signal, this.#clock);
    signal?.throwIfAborted();
    if (throttle < f.throttleRate) {
      throw new StoreError("Throttled", "slow down", { op, status: 503, code: "SlowDown" });
    }
    if (server < f.serverErrorRate) {
      throw new StoreError("Transport", "internal error", {
        op,
        status: 500,
        code: "InternalError",
      });
    }
    if (reset < f.resetRate) {
      if (how.mutates && applied < 0.5) {
        try {
          serve();
        } catch {
          // The caller never hears the answer of a request whose connection reset.
        }
      }
      throw new StoreError("Transport", "connection reset", { op, code: "ECONNRESET" });
    }
    const result = serve();
    if (how.slowBody && slow < f.slowBodyRate && f.slowBodyMs > 0) {
      await sleep(f.slowBodyMs, signal, this.#clock);
    }
    return result;
  }
}

/** The first index whose key is >= `key` in UTF-8 order. */
function lowerBound(keys: string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareUtf8(keys[mid], key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
