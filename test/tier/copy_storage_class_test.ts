// A topic's storage class reaches every write of its copies — the single PUTs, the multipart
// uploads (created and completed with it) and the `.index` objects — and a topic without one
// leaves the store's configured class alone.
import assert from "node:assert/strict";
import { decorateStore } from "../../providers/decorate.ts";
import type { ObjectStore } from "../../providers/types.ts";
import { copyPhase } from "../../src/tier/phases/copy.ts";
import { phaseRig } from "./_phase_rig.ts";

const MiB = 1024 * 1024;

/** A sim store that records the storage class each write asked for, by operation and key. */
function recording(
  seen: { op: string; key: string; storageClass?: string }[],
): (sim: ObjectStore) => ObjectStore {
  return (sim) => {
    const inner = decorateStore(sim, (call) => call.run(call.signal));
    return {
      ...inner,
      put: (key, body, o) => {
        seen.push({ op: "put", key, storageClass: o?.storageClass });
        return inner.put(key, body, o);
      },
      createMultipart: (key, o) => {
        seen.push({ op: "create", key, storageClass: o?.storageClass });
        return inner.createMultipart(key, o);
      },
      completeMultipart: (key, id, parts, o) => {
        seen.push({ op: "complete", key, storageClass: o?.storageClass });
        return inner.completeMultipart(key, id, parts, o);
      },
    };
  };
}

for (const storageClass of ["GLACIER_IR", undefined]) {
  Deno.test(`copies carry the topic's storage class on every write (${storageClass ?? "none"})`, async () => {
    const seen: { op: string; key: string; storageClass?: string }[] = [];
    const r = await phaseRig({
      messages: 1_300,
      payloadSize: 10_000,
      segmentSize: 6 * MiB,
      wrap: recording(seen),
      // 5 MiB parts: the 6 MiB segments go as multipart uploads, the last one as a PUT.
      config: (c) => void (c.tiered_storage.part_size = 5 * MiB),
    });
    try {
      const copied = await copyPhase(r.ctx, r.ledger, {
        segments: await r.local(),
        format: r.format,
        reportedGaps: new Set(),
        storageClass,
      });
      assert.deepEqual(copied.problems, []);
      const writes = seen.filter((w) => w.key.endsWith(".log") || w.key.endsWith(".index"));
      assert.ok(writes.some((w) => w.op === "create"), "multipart uploads among them");
      assert.ok(writes.some((w) => w.key.endsWith(".index")));
      for (const w of writes) assert.equal(w.storageClass, storageClass, `${w.op} ${w.key}`);
    } finally {
      await r.cleanup();
    }
  });
}
