// Copies every sealed segment of a fresh phase rig into `store`, proves the copies and evicts the
// local files — 6 MiB segments in 5 MiB parts, so multipart uploads and single PUTs both go —
// and checks that every sealed segment went. For the S3 implementations' suites.
import assert from "node:assert/strict";
import { access } from "node:fs/promises";
import { decorateStore } from "../../providers/decorate.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { getSegment } from "../../src/state/segment_state.ts";
import { UnlinkEvictor } from "../../src/tier/evictor.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { evictPhase } from "../../src/tier/phases/evict.ts";
import { advanceFloor } from "../../src/tier/phases/floor.ts";
import { type PhaseRig, phaseRig } from "../tier/_phase_rig.ts";
import type { SegmentFiles } from "../../src/partition/segments.ts";

const MiB = 1024 * 1024;

/**
 * @param o.beforeEvict runs once the copies are made, before the local files go
 * @param o.storedProof every copy must be proven by the store's stored checksum: no object is
 *   read back (no GET at all)
 * @returns how many segments were copied, proven and evicted
 */
export async function copyProveEvict(
  store: ObjectStore,
  o: {
    beforeEvict?: (r: PhaseRig, sealed: SegmentFiles[]) => Promise<void>;
    storedProof?: boolean;
  } = {},
): Promise<number> {
  let gets = 0;
  const counted = decorateStore(store, (call) => {
    if (call.op === "get") gets++;
    return call.run(call.signal);
  });
  const r = await phaseRig({
    messages: 1_300,
    payloadSize: 10_000,
    segmentSize: 6 * MiB,
    wrap: () => counted,
    config: (c) => void (c.tiered_storage.part_size = 5 * MiB),
  });
  try {
    const sealed = (await r.local()).filter((s) => s.sealed);
    assert.ok(sealed.length >= 2, `${sealed.length} sealed segments`);
    const copied = await copyPhase(r.ctx, r.ledger, {
      segments: await r.local(),
      format: r.format,
      reportedGaps: new Set(),
    });
    assert.deepEqual(copied.problems, []);
    await advanceFloor(r.ctx, r.ledger);
    await o.beforeEvict?.(r, sealed);
    const evicted = await evictPhase(r.ctx, r.ledger, {
      dir: r.dir,
      segments: await r.local(),
      format: r.format,
      topic: { ...r.topic, local_retention_size: 0 },
      evictor: new UnlinkEvictor(),
    });
    assert.deepEqual(evicted.problems, []);
    assert.equal(evicted.evicted, sealed.length, "every sealed segment, proven, evicted");
    for (const seg of sealed) {
      assert.equal(getSegment(r.ledger.state, 0n, seg.start)?.evicted, true);
      await assert.rejects(access(seg.logPath));
    }
    if (o.storedProof) assert.equal(gets, 0, "proven by the stored checksums, nothing read back");
    return sealed.length;
  } finally {
    await r.cleanup();
  }
}
