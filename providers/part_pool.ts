// A node-wide pool of part buffers for multipart uploads: memory stays near
// `partSize × count` however many uploads run at once, and buffers are reused instead of
// left to the garbage collector (which frees large buffers late).

/** Fixed-size part buffers, handed out and taken back. */
export class PartBufferPool {
  readonly partSize: number;
  readonly #free: ArrayBuffer[] = [];
  readonly #waiters: (() => void)[] = [];
  #outstanding = 0;
  readonly #count: number;

  /**
   * @param partSize bytes per buffer
   * @param count buffers at most (at least 1)
   */
  constructor(partSize: number, count: number) {
    this.partSize = partSize;
    this.#count = Math.max(1, count);
  }

  /** Buffers currently handed out. */
  get outstanding(): number {
    return this.#outstanding;
  }

  /**
   * A view of `length` bytes (≤ partSize) over a pooled buffer; waits while all are out.
   * @throws the signal's reason when it aborts while waiting
   */
  async acquire(length: number, signal?: AbortSignal): Promise<Uint8Array> {
    if (length > this.partSize) throw new RangeError(`part of ${length} bytes > ${this.partSize}`);
    while (this.#outstanding >= this.#count) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal?.reason);
        this.#waiters.push(() => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    }
    this.#outstanding++;
    return new Uint8Array(this.#free.pop() ?? new ArrayBuffer(this.partSize), 0, length);
  }

  /** Takes a buffer back (once the store is done with it). */
  release(part: Uint8Array): void {
    if (part.buffer.byteLength === this.partSize) this.#free.push(part.buffer as ArrayBuffer);
    this.#outstanding--;
    this.#waiters.shift()?.();
  }
}
