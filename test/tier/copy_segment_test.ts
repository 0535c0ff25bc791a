// Copying one segment: each part read for the upload is checked against the CRC-32 the verify
// pass took of it, so a segment changed in place after it was verified — during a multipart
// upload, or before a single put — is never published (nor recorded as verified); a store that
// wants the whole object's checksum at completion gets the one of the bytes sent.
import assert from "node:assert/strict";
import { open, readFile } from "node:fs/promises";
import { checksumOf } from "../../providers/checksum.ts";
import { decorateStore } from "../../providers/decorate.ts";
import type { Checksum, ObjectStore } from "../../providers/types.ts";
import { copySegment, SegmentChangedError, segmentSource } from "../../src/tier/copy_segment.ts";
import { type PhaseRig, phaseRig } from "./_phase_rig.ts";

const MiB = 1024 * 1024;

/** A partition whose first segment takes three 5 MiB parts. */
function bigRig(): Promise<PhaseRig> {
  return phaseRig({ segmentSize: 11 * MiB, payloadSize: 4000, messages: 3200 });
}

Deno.test("copy: a segment changed in place during its multipart upload is not completed", async () => {
  const r = await bigRig();
  try {
    const [seg] = await r.local();
    assert.ok(seg.logSize > 2 * 5 * MiB, `${seg.logSize} bytes: three parts`);
    const src = await segmentSource(seg, r.format, r.ledger.keys(seg.start), 5 * MiB);
    let completions = 0;
    let flipped = false;
    // While part 1 is being stored (before part 3 is read), one byte of part 3 changes on disk:
    // same size, only the bytes can tell.
    const store: ObjectStore = decorateStore(r.sim, async (call) => {
      if (call.op === "put_part" && !flipped) {
        flipped = true;
        const fh = await open(seg.logPath, "r+");
        const at = 10 * MiB + 17;
        const b = new Uint8Array(1);
        await fh.read(b, 0, 1, at);
        b[0] ^= 0x40;
        await fh.write(b, 0, 1, at);
        await fh.close();
      }
      if (call.op === "complete_multipart") completions++;
      return await call.run(call.signal);
    });
    await assert.rejects(
      copySegment(store, src, { concurrency: 1 }),
      (err: unknown) =>
        err instanceof SegmentChangedError &&
        /bytes 10485760-\d+ changed after they were verified/.test(err.message),
    );
    assert.equal(completions, 0, "the upload was never completed");
    assert.equal(r.sim.objects.get(src.keys.log), undefined, "nothing under the key");
    assert.equal(r.sim.uploads.size, 0, "the multipart upload was aborted");
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: a store that wants the whole object's checksum at completion gets the one of the bytes sent", async () => {
  const r = await bigRig();
  try {
    const [seg] = await r.local();
    const src = await segmentSource(seg, r.format, r.ledger.keys(seg.start), 5 * MiB);
    const given: (Checksum | undefined)[] = [];
    const inner = decorateStore(r.sim, (call) => call.run(call.signal));
    const store: ObjectStore = {
      ...inner,
      completionChecksum: "md5",
      completeMultipart: (key, id, parts, o) => {
        given.push(o?.checksum);
        return inner.completeMultipart(key, id, parts, o);
      },
    };
    assert.equal(await copySegment(store, src, { concurrency: 2 }), "uploaded");
    assert.deepEqual(given, [await checksumOf("md5", await readFile(seg.logPath))]);
  } finally {
    await r.cleanup();
  }
});

Deno.test("copy: a segment changed between its verify pass and a single put is not sent", async () => {
  const r = await phaseRig();
  try {
    const [seg] = await r.local();
    const src = await segmentSource(seg, r.format, r.ledger.keys(seg.start), 5 * MiB);
    assert.ok(seg.logSize <= 5 * MiB, "one put");
    const fh = await open(seg.logPath, "r+");
    const b = new Uint8Array(1);
    await fh.read(b, 0, 1, seg.logSize - 3);
    b[0] ^= 0x01;
    await fh.write(b, 0, 1, seg.logSize - 3);
    await fh.close();
    let puts = 0;
    const store = decorateStore(r.sim, (call) => {
      if (call.op === "put") puts++;
      return call.run(call.signal);
    });
    await assert.rejects(
      copySegment(store, src, { concurrency: 1 }),
      (err: unknown) =>
        err instanceof SegmentChangedError && /changed after they were verified/.test(err.message),
    );
    assert.equal(puts, 0, "nothing sent");
  } finally {
    await r.cleanup();
  }
});
