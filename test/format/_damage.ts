// Damage done to one record in the middle of a generated segment, the way disks and buggy
// writers do it, with where tierd must say the damage is: a flipped payload bit, a record that
// claims one more message than it holds, a length field that cannot be.
import { readFile, writeFile } from "node:fs/promises";
import { codecFor } from "../../src/format/codecs.ts";
import type { FormatErrorCode } from "../../src/format/errors.ts";
import type { GeneratedSegment } from "../../src/format/generate.ts";
import type { FormatName, RecordInfo } from "../../src/format/types.ts";

/** A kind of damage. */
export type Damage = "flipped payload bit" | "one message more than it holds" | "bad length";

/** Every kind of damage. */
export const DAMAGES: readonly Damage[] = [
  "flipped payload bit",
  "one message more than it holds",
  "bad length",
];

/** The files of a segment to damage. */
export type SegmentPaths = Pick<GeneratedSegment, "logPath" | "indexPath" | "startOffset">;

/** Where the damage must be reported. */
export interface DamageSite {
  code: FormatErrorCode;
  file: string;
  position: number;
}

/** The records of a segment's `.log` (file positions). */
export async function recordsOf(seg: SegmentPaths, format: FormatName): Promise<RecordInfo[]> {
  const log = new Uint8Array(await readFile(seg.logPath));
  return [...codecFor(format).walk(log, { file: seg.logPath, startOffset: seg.startOffset })];
}

/**
 * Damages the middle record of `seg` in place and says where tierd must find it.
 *
 * - flipped payload bit: one bit of the first payload byte (0.9: of the batch's first frame);
 *   only a checksum can tell.
 * - one message more than it holds: 0.9, the batch header's message_count + 1 (its frames end
 *   where the batch ends, so frame n has no room); 0.8, whose records hold one message each and
 *   whose dense `.index` is the message count, an index entry more, splitting the message.
 * - bad length: the top byte of the payload length set, beyond Iggy's 64 MB limit.
 */
export async function damageSegment(
  seg: SegmentPaths,
  format: FormatName,
  damage: Damage,
): Promise<DamageSite> {
  const records = await recordsOf(seg, format);
  const k = Math.floor(records.length / 2);
  const r = records[k];
  const log = new Uint8Array(await readFile(seg.logPath));
  const v = new DataView(log.buffer, log.byteOffset, log.byteLength);
  const is08 = format === "iggy-0.8";
  const frame = r.position + 256; // 0.9: the batch's first frame
  switch (damage) {
    case "flipped payload bit": {
      log[is08 ? r.position + 64 : frame + 48] ^= 0x01;
      await writeFile(seg.logPath, log);
      return { code: "checksum", file: seg.logPath, position: is08 ? r.position : frame };
    }
    case "one message more than it holds": {
      if (!is08) {
        v.setUint32(r.position + 48, r.messageCount + 1, true);
        await writeFile(seg.logPath, log);
        return { code: "bad_length", file: seg.logPath, position: r.position + r.size };
      }
      const index = new Uint8Array(await readFile(seg.indexPath));
      const out = new Uint8Array(index.length + 16);
      const ov = new DataView(out.buffer);
      out.set(index.subarray(0, k * 16), 0);
      out.set(index.subarray(k * 16), (k + 1) * 16);
      ov.setUint32(k * 16, k, true);
      ov.setUint32(k * 16 + 4, r.position + 64 + 1, true); // ends inside message k
      ov.setBigUint64(k * 16 + 8, r.timestamp, true);
      for (let i = k + 1; i < records.length + 1; i++) ov.setUint32(i * 16, i, true);
      await writeFile(seg.indexPath, out);
      return { code: "index_mismatch", file: seg.indexPath, position: k * 16 };
    }
    case "bad length": {
      const at = is08 ? r.position + 52 : frame + 36;
      log[at + 3] = 0xff;
      await writeFile(seg.logPath, log);
      return { code: "bad_length", file: seg.logPath, position: is08 ? r.position : frame };
    }
  }
}
