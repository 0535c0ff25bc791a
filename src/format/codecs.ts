// The lookup from a format name to its segment codec, and the list of every codec (for format
// detection). The contract they meet is SegmentCodec in codec.ts.
import type { SegmentCodec } from "./codec.ts";
import { iggy08 } from "./iggy08.ts";
import { iggy09 } from "./iggy09.ts";
import type { FormatName } from "./types.ts";

/**
 * The codec for a format.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { initHashes } from "../hash.ts";
 *
 * await initHashes();
 * const codec = codecFor("iggy-0.9");
 * const message = {
 *   offset: 0n,
 *   timestamp: 1_750_000_000_000_000n,
 *   originTimestamp: 1_750_000_000_000_000n,
 *   id: 1n,
 *   payload: new TextEncoder().encode("hello"),
 *   userHeaders: new Uint8Array(),
 * };
 * const bytes = codec.encodeRecord([message], { partitionId: 0 });
 * const records = [...codec.walk(bytes, { file: "00000000000000000000.log", startOffset: 0n })];
 * assert.equal(records[0].lastOffset, 0n);
 * ```
 */
export function codecFor(name: FormatName): SegmentCodec {
  switch (name) {
    case "iggy-0.8":
      return iggy08;
    case "iggy-0.9":
      return iggy09;
    default:
      throw new RangeError(`unknown segment format ${JSON.stringify(name)}`);
  }
}

/** Both codecs, oldest format first. */
export const ALL_CODECS: readonly SegmentCodec[] = [iggy08, iggy09];
