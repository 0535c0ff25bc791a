// A partition's health as `/v1/partitions` and the status page say it, from what opening it
// found: rebuilt from the bucket, or ok with every repair boot made named in the detail.
import assert from "node:assert/strict";
import { FIRST_SEEN } from "../../src/tier/boot.ts";
import { partitionHealth } from "../../src/tier/partition_health.ts";
import type { OpenOutcome } from "../../src/tier/partition_tier.ts";

const clean: OpenOutcome = {
  incarnation: { kind: "kept" },
  interrupted: 0,
  quarantined: [],
  evictionsRecorded: 0,
  adopted: 0,
  markersUnread: 0,
};

Deno.test("partition health: a clean open is ok with nothing to say", () => {
  assert.deepEqual(partitionHealth(clean), { state: "ok" });
  const first = { ...clean, incarnation: { kind: "new", incarnation: 7n, reason: FIRST_SEEN } };
  assert.deepEqual(partitionHealth(first as OpenOutcome), { state: "ok" });
});

Deno.test("partition health: a damaged journal or none at all is rebuilt, saying why", () => {
  const damaged = partitionHealth({
    ...clean,
    damage: { reason: "journal.log @ byte 40: checksum mismatch", keptAt: "/s/journal.damaged" },
  } as OpenOutcome);
  assert.equal(damaged.state, "rebuilt");
  assert.match(damaged.detail!, /byte 40: checksum mismatch; kept at \/s\/journal\.damaged/);
  const none = partitionHealth({
    ...clean,
    incarnation: { kind: "rebuilt", rebuilt: { segments: 12 } },
  } as unknown as OpenOutcome);
  assert.equal(none.state, "rebuilt");
  assert.match(none.detail!, /no journal: rebuilt from the bucket \(12 segments\)/);
});

Deno.test("partition health: every repair boot made is named; adopted copies mean rebuilt", () => {
  const h = partitionHealth({
    ...clean,
    incarnation: { kind: "moved", reason: "same segments at a new inode" },
    adopted: 2,
    evictionsRecorded: 3,
    quarantined: [{ path: "/s/m/00.remote", reason: "bad checksum" }, {
      path: "/s/m/01.remote",
      reason: "bad checksum",
    }],
    tornTail: { path: "/s/journal.log", validBytes: 100, droppedBytes: 7 },
  } as unknown as OpenOutcome);
  assert.equal(h.state, "rebuilt");
  for (
    const part of [
      "cut at byte 100 (7 bytes dropped)",
      "2 copies the journal did not list adopted",
      "3 evictions the journal lacked recorded",
      "directory moved or restored, same incarnation: same segments at a new inode",
      "2 marker(s) quarantined: /s/m/00.remote: bad checksum, …",
    ]
  ) assert.ok(h.detail!.includes(part), `${part} in ${h.detail}`);
});
