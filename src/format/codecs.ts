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
 * const codec = codecFor("iggy-0.9");
 * for (const r of codec.walk(bytes, { file: "x.log", startOffset: 0n })) console.log(r.lastOffset);
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
