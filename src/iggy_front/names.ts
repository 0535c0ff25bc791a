// Streams and topics named by name, as the SDKs' high-level consumers name them, mapped to the
// numeric ids tierd's partitions are kept under. The broker decides what a name means, asked on
// the client's own session or token (so a client learns nothing it could not ask itself); the
// answer is reused for a short while per client and asked again whenever tierd is about to answer
// a poll from the bucket, so a topic deleted and recreated under the same name is never read
// through the old one's copies.
import { createHash } from "node:crypto";
import { type Clock, systemClock } from "../base/clock.ts";

/** The numeric ids of a stream and a topic. */
export interface TopicIds {
  stream: number;
  topic: number;
}

/** Names resolved at once at most; past it the oldest half is forgotten. */
const MAX_ENTRIES = 10_000;

/** A stream or topic as a client named it: a numeric id (as text) or a name. */
const NUMERIC = /^(0|[1-9]\d{0,9})$/;

/** The number a path segment or identifier names, when it is a plain u32. */
export function numericId(text: string): number | undefined {
  if (!NUMERIC.test(text)) return undefined;
  const n = Number(text);
  return n <= 0xffff_ffff ? n : undefined;
}

/** Resolved names, per client. */
export class NameCache {
  readonly #ttlMs: number;
  readonly #clock: Clock;
  readonly #entries = new Map<string, { at: number; ids: TopicIds | undefined }>();

  /** @param ttlMs how long an answer is reused for the same client and names */
  constructor(ttlMs: number, clock: Clock = systemClock) {
    this.#ttlMs = ttlMs;
    this.#clock = clock;
  }

  /**
   * The ids `stream` and `topic` name for `client` (its token or session): reused, or asked of
   * the broker with `lookup` (undefined: the broker does not know them).
   *
   * @param fresh ask now, whatever was kept
   * @throws what `lookup` throws (the broker's refusal)
   */
  async resolve(
    client: string,
    stream: string,
    topic: string,
    lookup: () => Promise<TopicIds | undefined>,
    fresh = false,
  ): Promise<TopicIds | undefined> {
    const key = createHash("sha256").update(`${client}\n${stream}\n${topic}`).digest("base64");
    const now = this.#clock.monotonic();
    const hit = this.#entries.get(key);
    if (!fresh && hit && now - hit.at < this.#ttlMs) return hit.ids;
    const ids = await lookup();
    if (this.#entries.size >= MAX_ENTRIES) {
      let n = 0;
      for (const k of this.#entries.keys()) {
        if (n++ >= MAX_ENTRIES / 2) break;
        this.#entries.delete(k);
      }
    }
    this.#entries.delete(key);
    this.#entries.set(key, { at: now, ids });
    return ids;
  }
}

/** True when both name the same stream and topic. */
export function sameIds(a: TopicIds | undefined, b: TopicIds | undefined): boolean {
  return a !== undefined && b !== undefined && a.stream === b.stream && a.topic === b.topic;
}
