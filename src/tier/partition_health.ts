// A partition's health in words, from what opening it found: rebuilt from the bucket (a damaged
// or missing journal, copies the journal did not list), or ok with what boot had to mend (a torn
// tail, evictions recorded from markers, a moved directory, quarantined markers).
import type { PartitionHealth } from "../read/state_source.ts";
import { FIRST_SEEN } from "./boot.ts";
import type { OpenOutcome } from "./partition_tier.ts";

/** The health `/v1/partitions` and the status page show for a partition opened with `boot`. */
export function partitionHealth(boot: OpenOutcome): PartitionHealth {
  const { damage, incarnation } = boot;
  if (damage) {
    return {
      state: "rebuilt",
      detail: `${damage.reason}; kept at ${damage.keptAt}; rebuilt from the bucket`,
    };
  }
  if (incarnation.kind === "rebuilt") {
    return {
      state: "rebuilt",
      detail: `no journal: rebuilt from the bucket (${incarnation.rebuilt.segments} segments)`,
    };
  }
  // Anything else boot had to mend, in words: the journal fell behind the bucket (a cut-short
  // journal is rebuilt in part), or the directory or the markers were not what it said.
  const { tornTail, adopted, evictionsRecorded, quarantined } = boot;
  const notes: string[] = [];
  if (tornTail) {
    notes.push(
      `journal ${tornTail.path} ended in an incomplete record: cut at byte ` +
        `${tornTail.validBytes} (${tornTail.droppedBytes} bytes dropped)`,
    );
  }
  if (adopted > 0) {
    notes.push(`${adopted} copies the journal did not list adopted from the bucket`);
  }
  if (evictionsRecorded > 0) {
    notes.push(`${evictionsRecorded} evictions the journal lacked recorded from their markers`);
  }
  if (incarnation.kind === "moved") {
    notes.push(`directory moved or restored, same incarnation: ${incarnation.reason}`);
  }
  if (incarnation.kind === "new" && incarnation.reason !== FIRST_SEEN) {
    notes.push(`new incarnation: ${incarnation.reason}`);
  }
  if (quarantined.length > 0) {
    notes.push(
      `${quarantined.length} marker(s) quarantined: ${quarantined[0].path}: ${
        quarantined[0].reason
      }${quarantined.length > 1 ? ", …" : ""}`,
    );
  }
  return {
    state: adopted > 0 ? "rebuilt" : "ok",
    ...(notes.length > 0 && { detail: notes.join("; ") }),
  };
}
