// Can the broker's partition directory be the one a journal describes? Evicted segments do not
// come back, and offsets never restart below the floor — unless the topic was
// deleted and recreated (often under the same inode: ext4 hands a deleted directory's inode to
// the next one made) or the partition purged. Cheap checks from a listing, no bytes read: the
// read path asks before it answers from a journal, and a pass before it goes on.
import { getSegment, type PartitionState } from "../state/segment_state.ts";

/** What contradicts the journal, in words, and which rule. */
export interface Contradiction {
  kind: "restarted_below_floor" | "evicted_back";
  reason: string;
}

/**
 * The first thing in the listing the journal's state contradicts, or undefined when it fits:
 * offsets restarted at or below the floor (a purge, or a topic recreated in place), then a
 * segment back where the journal says it was evicted. (A sealed segment shorter than its copy is
 * no contradiction here: damage to one segment looks the same; the read path reads its copy, and
 * eviction refuses it.)
 * @param local the broker's segments, oldest first (the last one is the active segment)
 */
export function directoryContradicts(
  local: readonly { start: bigint; logSize: number }[],
  s: PartitionState,
): Contradiction | undefined {
  const active = local.at(-1);
  if (active && s.floor >= 0n && active.start <= s.floor) {
    return {
      kind: "restarted_below_floor",
      reason: `the newest segment starts at ${active.start}, at or below the floor ${s.floor} ` +
        "(offsets restarted)",
    };
  }
  for (const l of local) {
    const r = getSegment(s, s.generation, l.start);
    if (r?.meta === undefined) continue;
    if (r.evicted) {
      return {
        kind: "evicted_back",
        reason: `segment ${l.start} is in the directory, but the journal says it was evicted`,
      };
    }
  }
  return undefined;
}
