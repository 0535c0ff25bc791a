// The chunks that landed last, kept in memory beside their files for the reads that follow: a
// sequential reader takes an 8 MiB chunk a MiB at a time, right after its fetch (or its
// readahead) wrote it, and each of those reads would otherwise open the file, read it back and
// check its block checksums — the same bytes, still in memory. Bounded in bytes. A chunk read to
// its end is let go (a sequential reader is done with it). When the cap is reached the newest
// landing is the one not kept: readahead lands chunks in the order they will be read, so the
// older ones are read sooner; only chunks nobody took within `maxAgeMs` make room.

/** The last chunks fetched, by name, within a byte cap. */
export class LandedChunks {
  readonly #cap: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  /** Insertion order is age order: a Map iterates oldest first. */
  readonly #chunks = new Map<string, { bytes: Uint8Array; at: number }>();
  #bytes = 0;

  /**
   * @param capBytes the most bytes held (0 holds nothing)
   * @param maxAgeMs how long a chunk nobody read keeps its place against a newer one
   * @param now the time in ms (the cache's clock)
   */
  constructor(capBytes: number, maxAgeMs: number, now: () => number) {
    this.#cap = Math.max(0, capBytes);
    this.#maxAgeMs = maxAgeMs;
    this.#now = now;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Keeps `bytes` as chunk `name` (replacing any) if they fit within the cap once the chunks
   * nobody read for `maxAgeMs` are let go; else keeps nothing new.
   *
   * @returns whether it was kept
   */
  put(name: string, bytes: Uint8Array): boolean {
    this.drop(name);
    const now = this.#now();
    for (const [old, held] of this.#chunks) {
      if (this.#bytes + bytes.length <= this.#cap || now - held.at < this.#maxAgeMs) break;
      this.drop(old);
    }
    if (this.#bytes + bytes.length > this.#cap) return false;
    this.#chunks.set(name, { bytes, at: now });
    this.#bytes += bytes.length;
    return true;
  }

  /**
   * Data bytes `[from, to)` of chunk `name` (offsets within the chunk), or undefined when it is
   * not held. A read that reaches the chunk's end lets it go.
   *
   * @returns a view of the held bytes: the caller must not change it
   */
  take(name: string, from: number, to: number): Uint8Array | undefined {
    const bytes = this.#chunks.get(name)?.bytes;
    if (bytes === undefined || to > bytes.length) return undefined;
    if (to === bytes.length) this.drop(name);
    return bytes.subarray(from, to);
  }

  /** Lets chunk `name` go (evicted, found corrupt, or a read that could not be proven). */
  drop(name: string): void {
    const held = this.#chunks.get(name);
    if (held === undefined) return;
    this.#chunks.delete(name);
    this.#bytes -= held.bytes.length;
  }

  /** Lets every chunk go. */
  clear(): void {
    this.#chunks.clear();
    this.#bytes = 0;
  }
}
