// Streaming hashers over hash-wasm, reused: each new one is a WebAssembly instance, and
// instantiating one cost 0.7-1 ms of CPU in Bun — as much as hashing a few MiB, and 12 % of a
// tiering agent's profile over twenty small segments. A hasher whose digest was taken goes back
// to its pool for the next stream.
import type { IHasher } from "hash-wasm";

/** Idle hashers kept per pool at most. */
const IDLE_MAX = 16;

/** One kind of hasher: those idle, and how to make a new one. */
export class HasherPool {
  readonly #idle: IHasher[] = [];

  /** @param make a new instance (hash-wasm's `createCRC64`, `createXXHash128`, …) */
  constructor(readonly name: string, readonly make: () => Promise<IHasher>) {}

  /**
   * A fresh stream: an idle hasher, reset, or a new one. `finish` turns the hasher's state into
   * the digest; afterwards the stream is spent (an update or a second digest throws).
   */
  async stream<T>(
    finish: (h: IHasher) => T,
  ): Promise<{ update(bytes: Uint8Array): void; digest(): T }> {
    const h = this.#idle.pop() ?? await this.make();
    h.init();
    let done = false;
    return {
      update: (bytes) => {
        if (done) throw new Error(`${this.name} stream updated after its digest`);
        h.update(bytes);
      },
      digest: () => {
        if (done) throw new Error(`${this.name} stream digested twice`);
        done = true;
        const value = finish(h);
        if (this.#idle.length < IDLE_MAX) this.#idle.push(h);
        return value;
      },
    };
  }
}
