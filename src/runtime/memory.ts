// Gives garbage's memory back where the runtime keeps it. Under Bun (the shipped binary)
// JavaScriptCore sets its own pace: replaying many thousand journal records at boot, or sending
// large answers made of many small objects, leaves a heap several times what stays live. A full
// collection is asked for once boot is done, and whenever read memory comes back while the agent
// is resident beyond its idle size plus the read memory budget. Deno's V8 keeps pace by itself.

interface BunRuntime {
  gc(force: boolean): void;
}

/** A full collection now where the runtime allows it (Bun); a no-op elsewhere. */
export function collectGarbage(): void {
  const bun = (globalThis as { Bun?: BunRuntime }).Bun;
  bun?.gc(true);
}

/** The process's resident set in bytes. */
function residentBytes(): number {
  return process.memoryUsage.rss();
}

/**
 * Keeps the agent resident within its idle size plus the read memory budget: once a quarter of
 * the budget has come back from reads, it looks at the resident set, and asks for a collection
 * when it is over. A collection of a few hundred MiB of heap takes about 50-90 ms on a small
 * machine; a steady load of small reads, whose garbage the runtime collects at its own pace,
 * stays under the mark and is never paused.
 */
export class ResidentGuard {
  readonly #rss: () => number;
  readonly #collect: () => void;
  readonly #collected?: () => void;
  #idle: number;
  #released = 0;
  #collections = 0;

  /**
   * @param allowance bytes above idle the agent may be resident (the read memory budget)
   * @param o.rss the resident set now @default the process's
   * @param o.collect a full collection @default {@link collectGarbage}
   * @param o.collected told after each collection (the metric)
   */
  constructor(
    readonly allowance: number,
    o: { rss?: () => number; collect?: () => void; collected?: () => void } = {},
  ) {
    this.#rss = o.rss ?? residentBytes;
    this.#collect = o.collect ?? collectGarbage;
    this.#collected = o.collected;
    this.#idle = this.#rss();
  }

  /** Collections asked for so far. */
  get collections(): number {
    return this.#collections;
  }

  /** Takes the resident set now as the idle size (once boot's garbage is collected). */
  settle(): void {
    this.#idle = this.#rss();
  }

  /** Read memory came back: collects when a quarter of the budget has and the agent is over. */
  released(bytes: number): void {
    this.#released += bytes;
    if (this.#released < this.allowance / 4) return;
    this.#released = 0;
    if (this.#rss() <= this.#idle + this.allowance) return;
    this.#collections++;
    this.#collect();
    this.#collected?.();
  }
}
