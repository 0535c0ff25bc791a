// Store-agnostic multipart upload: coalesces writes into parts of `partSize`, keeps at most
// `concurrency` parts in flight (a write waits while the window is full, so memory stays near
// partSize × (concurrency + 1)), and aborts the upload on any failure. The upload id is handed
// to `onUploadId` before the first part is sent, so the caller can journal it first.
import { MAX_PART_NUMBER, MIN_PART_SIZE } from "./_rules.ts";
import {
  type Checksum,
  type CompletedPart,
  type ObjectStore,
  type PutResult,
  StoreError,
  type UserMetadata,
} from "./types.ts";

/** Runs one store call, e.g. under `withRetry`; it must pass its signal on to `op`. */
export type StoreCallRunner = <T>(op: (signal?: AbortSignal) => Promise<T>) => Promise<T>;

/** Options of {@link BufferedMultipartWriter}. */
export interface MultipartWriterOptions {
  /** Bytes per part; every part but the last has exactly this many. At least `minPartSize`. */
  partSize: number;
  /** Parts in flight at most. @default 4 */
  concurrency?: number;
  metadata?: UserMetadata;
  contentType?: string;
  /** The object's storage class or tier (see `PutOptions.storageClass`). */
  storageClass?: string;
  /** Never overwrite: the result is `AlreadyExists` when the key is taken. */
  ifAbsent?: boolean;
  /** Aborts the upload (and the multipart upload in the store). */
  signal?: AbortSignal;
  /** Called (and awaited) with the upload id right after it is created, before any part. */
  onUploadId?: (uploadId: string) => void | Promise<void>;
  /** Called after each stored part (or the single put) with the bytes stored so far. */
  onProgress?: (bytesStored: number) => void;
  /** Called once the store is done with a part handed to `writePart` (stored or failed). */
  recycle?: (part: Uint8Array) => void;
  /** Wraps each store call, for retries. @default one attempt */
  run?: StoreCallRunner;
  /** The smallest part the store accepts (all but the last). @default 5 MiB, S3's */
  minPartSize?: number;
}

type State = "open" | "completing" | "done" | "failed" | "aborted";

const MIN_BUFFER = 64 * 1024;

/**
 * Writes one object through a multipart upload, parts uploaded concurrently.
 * Objects that end up smaller than one part are sent as a single `put` instead (no upload is
 * created and `onUploadId` is not called).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore({ minPartSize: 1024 });
 * const uploadIds: string[] = [];
 * const writer = new BufferedMultipartWriter(store, "iggy/a.log", {
 *   partSize: 1024,
 *   minPartSize: 1024, // the store's smallest part (S3's is 5 MiB)
 *   concurrency: 2,
 *   ifAbsent: true,
 *   onUploadId: (id) => void uploadIds.push(id), // journal it: a crash leaves it to abort
 * });
 * for (const chunk of [new Uint8Array(1500), new Uint8Array(1500)]) await writer.write(chunk);
 * const result = await writer.complete(); // Created | AlreadyExists
 * assert.equal(result.status, "Created");
 * assert.equal(uploadIds.length, 1);
 * assert.equal(store.objects.get("iggy/a.log")?.bytes.length, 3000);
 * ```
 */
export class BufferedMultipartWriter {
  readonly #store: ObjectStore;
  readonly #key: string;
  readonly #options: MultipartWriterOptions;
  readonly #partSize: number;
  readonly #concurrency: number;
  readonly #run: StoreCallRunner;
  readonly #controller = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #parts: CompletedPart[] = [];
  #buffer: Uint8Array | undefined;
  /** Checksums of the buffered part, as `writePart` was given them. */
  #bufferChecksums: readonly Checksum[] | undefined;
  #filled = 0;
  #uploadId: Promise<string> | undefined;
  #nextPart = 1;
  #written = 0;
  #stored = 0;
  #state: State = "open";
  #failure: unknown;
  #cleanup: Promise<void> | undefined;

  /**
   * @param store where the object goes
   * @param key the object's key
   * @throws {RangeError} for a part size below `minPartSize` or a concurrency below 1
   */
  constructor(store: ObjectStore, key: string, options: MultipartWriterOptions) {
    const minPartSize = options.minPartSize ?? MIN_PART_SIZE;
    if (!Number.isSafeInteger(options.partSize) || options.partSize < minPartSize) {
      throw new RangeError(
        `partSize must be an integer >= ${minPartSize}, got ${options.partSize}`,
      );
    }
    const concurrency = options.concurrency ?? 4;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be an integer >= 1, got ${concurrency}`);
    }
    this.#store = store;
    this.#key = key;
    this.#options = options;
    this.#partSize = options.partSize;
    this.#concurrency = concurrency;
    this.#run = options.run ?? ((op) => op());
    const outer = options.signal;
    if (outer) {
      const onAbort = () => this.#fail(outer.reason);
      if (outer.aborted) onAbort();
      else outer.addEventListener("abort", onAbort, { once: true });
    }
  }

  /** The upload id once the upload exists. */
  get uploadId(): Promise<string> | undefined {
    return this.#uploadId;
  }

  /** Bytes accepted by `write` so far (buffered or sent). */
  get bytesWritten(): number {
    return this.#written;
  }

  /**
   * Appends bytes to the object. The bytes are copied; the caller may reuse its buffer once
   * the promise resolves. Waits while `concurrency` parts are in flight.
   * @throws the upload's first failure (after the upload was aborted)
   */
  async write(bytes: Uint8Array): Promise<void> {
    await this.#throwIfUnusable();
    this.#written += bytes.byteLength;
    let offset = 0;
    while (offset < bytes.byteLength) {
      // A full part goes out only once more bytes follow it, so an object of exactly one
      // part is still a single put.
      if (this.#filled === this.#partSize) await this.#sendFull();
      const want = this.#filled + (bytes.byteLength - offset);
      if (
        !this.#buffer ||
        (this.#buffer.byteLength < want && this.#buffer.byteLength < this.#partSize)
      ) {
        this.#grow(want);
      }
      const n = Math.min(this.#partSize - this.#filled, bytes.byteLength - offset);
      this.#bufferChecksums = undefined; // of other bytes than the part now holds
      this.#buffer!.set(bytes.subarray(offset, offset + n), this.#filled);
      this.#filled += n;
      offset += n;
    }
  }

  /**
   * Hands over `part` as the next part without copying; the writer owns it from now on.
   * Every part but the last must be exactly `partSize`; don't mix with `write()`.
   * @param checksums checksums of `part` already taken, sent with it in place of hashing it
   *   again (`PartOptions.checksums`)
   * @throws {RangeError} when bytes from `write()` or a short part are pending, or the part
   *   is empty or larger than `partSize`
   */
  async writePart(part: Uint8Array, checksums?: readonly Checksum[]): Promise<void> {
    await this.#throwIfUnusable();
    if (part.byteLength === 0 || part.byteLength > this.#partSize) {
      throw new RangeError(`a part holds 1..${this.#partSize} bytes, got ${part.byteLength}`);
    }
    if (this.#filled === this.#partSize) await this.#sendFull();
    if (this.#filled !== 0) {
      throw new RangeError("writePart() after a short part or bytes buffered by write()");
    }
    this.#written += part.byteLength;
    this.#buffer = part;
    this.#bufferChecksums = checksums;
    this.#filled = part.byteLength;
  }

  /**
   * Sends a buffered full part now rather than at the next write or `complete()`, so a caller
   * whose part buffers come from a shared pool never sits on one while it waits for the next.
   */
  async flush(): Promise<void> {
    await this.#throwIfUnusable();
    if (this.#filled === this.#partSize) await this.#sendFull();
  }

  async #sendFull(): Promise<void> {
    const full = this.#buffer!;
    const checksums = this.#takeChecksums();
    this.#buffer = undefined;
    this.#filled = 0;
    await this.#dispatch(full, checksums);
  }

  /**
   * Sends what is buffered, waits for every part and completes the upload.
   * @param options.checksum the whole object's checksum, for a store that wants one
   *   (`completionChecksum`); ignored for an object sent as a single put
   * @returns `Created`, or `AlreadyExists` with `ifAbsent` when the key was taken (the upload
   *   is then aborted)
   * @throws the first failure, after aborting the upload
   */
  async complete(options: { checksum?: Checksum } = {}): Promise<PutResult> {
    await this.#throwIfUnusable();
    this.#state = "completing";
    try {
      if (!this.#uploadId) return await this.#putWhole();
      if (this.#filled > 0) {
        const last = this.#buffer!.subarray(0, this.#filled);
        const checksums = this.#takeChecksums();
        this.#buffer = undefined;
        this.#filled = 0;
        await this.#dispatch(last, checksums);
      }
      await this.#drain();
      await this.#throwIfFailed();
      const uploadId = await this.#uploadId;
      const parts = [...this.#parts].sort((a, b) => a.partNumber - b.partNumber);
      const result = await this.#run((signal) =>
        this.#store.completeMultipart(this.#key, uploadId, parts, {
          ifAbsent: this.#options.ifAbsent,
          checksum: options.checksum,
          storageClass: this.#options.storageClass,
          signal: this.#signal(signal),
        })
      );
      if (result.status === "AlreadyExists") await this.#abortUpload();
      this.#state = "done";
      return result;
    } catch (err) {
      this.#fail(err);
      await this.#cleanup;
      throw err;
    }
  }

  /**
   * Stops the upload: cancels parts in flight and aborts the multipart upload in the store.
   * @throws when the store refuses the abort (the upload id is still worth a later cleanup)
   */
  async abort(): Promise<void> {
    if (this.#state === "done" || this.#state === "aborted") return;
    if (this.#state === "failed") return await this.#cleanup;
    this.#state = "aborted";
    this.#controller.abort(new DOMException("multipart upload aborted", "AbortError"));
    await this.#drain();
    await this.#abortUpload(true);
  }

  #grow(want: number): void {
    const size = Math.min(
      this.#partSize,
      Math.max(MIN_BUFFER, want, (this.#buffer?.byteLength ?? 0) * 2),
    );
    const next = new Uint8Array(size);
    if (this.#buffer) next.set(this.#buffer.subarray(0, this.#filled));
    this.#buffer = next;
  }

  async #putWhole(): Promise<PutResult> {
    const body = this.#buffer ? this.#buffer.subarray(0, this.#filled) : new Uint8Array(0);
    const checksums = this.#takeChecksums();
    const result = await this.#run((signal) =>
      this.#store.put(this.#key, body, {
        ifAbsent: this.#options.ifAbsent,
        metadata: this.#options.metadata,
        contentType: this.#options.contentType,
        checksums,
        signal: this.#signal(signal),
      })
    );
    this.#buffer = undefined;
    this.#filled = 0;
    this.#stored = body.byteLength;
    this.#options.onProgress?.(this.#stored);
    this.#state = "done";
    return result;
  }

  /** The buffered part's checksums, once: the buffer is being sent or dropped. */
  #takeChecksums(): readonly Checksum[] | undefined {
    const checksums = this.#bufferChecksums;
    this.#bufferChecksums = undefined;
    return checksums;
  }

  async #dispatch(part: Uint8Array, checksums?: readonly Checksum[]): Promise<void> {
    while (this.#inFlight.size >= this.#concurrency) await Promise.race(this.#inFlight);
    await this.#throwIfFailed();
    const uploadId = await (this.#uploadId ??= this.#createUpload());
    await this.#throwIfFailed();
    const partNumber = this.#nextPart++;
    if (partNumber > MAX_PART_NUMBER) {
      const err = new StoreError(
        "Unsupported",
        `${this.#key}: more than ${MAX_PART_NUMBER} parts; use a larger part size`,
        { op: "putPart", key: this.#key, code: "InvalidArgument" },
      );
      this.#fail(err);
      await this.#cleanup;
      throw err;
    }
    const task: Promise<void> = this.#run((signal) =>
      this.#store.putPart(this.#key, uploadId, partNumber, part, {
        signal: this.#signal(signal),
        checksums,
      })
    ).then(
      (stored) => {
        this.#parts.push(stored);
        this.#stored += part.byteLength;
        this.#options.onProgress?.(this.#stored);
      },
      (err) => this.#fail(err),
    ).finally(() => {
      this.#inFlight.delete(task);
      this.#options.recycle?.(part);
    });
    this.#inFlight.add(task);
  }

  async #createUpload(): Promise<string> {
    try {
      const uploadId = await this.#run((signal) =>
        this.#store.createMultipart(this.#key, {
          metadata: this.#options.metadata,
          contentType: this.#options.contentType,
          storageClass: this.#options.storageClass,
          signal: this.#signal(signal),
        })
      );
      // Resolve first so a failing callback still leaves the id for the abort.
      this.#uploadId = Promise.resolve(uploadId);
      await this.#options.onUploadId?.(uploadId);
      return uploadId;
    } catch (err) {
      this.#fail(err);
      throw err;
    }
  }

  #signal(inner: AbortSignal | undefined): AbortSignal {
    return inner ? AbortSignal.any([inner, this.#controller.signal]) : this.#controller.signal;
  }

  /** Records the first failure, cancels the parts in flight and aborts the upload once they settle. */
  #fail(err: unknown): void {
    if (this.#state === "failed" || this.#state === "done" || this.#state === "aborted") return;
    this.#state = "failed";
    this.#failure = err;
    this.#controller.abort(err);
    this.#cleanup = (async () => {
      await this.#drain();
      await this.#abortUpload();
    })();
  }

  async #drain(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /** Aborts the multipart upload if one was created; best effort unless `strict`. */
  async #abortUpload(strict = false): Promise<void> {
    const pending = this.#uploadId;
    if (!pending) return;
    let uploadId: string;
    try {
      uploadId = await pending;
    } catch {
      return; // never created
    }
    try {
      // Not under our (aborted) signal: the abort itself must get through.
      await this.#run(() => this.#store.abortMultipart(this.#key, uploadId));
    } catch (err) {
      if (strict) throw err;
    }
  }

  async #throwIfFailed(): Promise<void> {
    if (this.#state === "failed") {
      await this.#cleanup;
      throw this.#failure;
    }
  }

  async #throwIfUnusable(): Promise<void> {
    await this.#throwIfFailed();
    if (this.#state === "aborted") throw new DOMException("multipart upload aborted", "AbortError");
    if (this.#state === "done" || this.#state === "completing") {
      throw new Error(`the upload of ${this.#key} is already complete`);
    }
  }
}
