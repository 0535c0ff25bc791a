// A copy checked end to end before it is trusted with a segment's last local bytes (eviction) or
// adopted as the segment's copy (dangling cleanup): the HEADs of `verifyCopy`, then the bytes
// themselves through `verifyContent` — the store's own checksum, or a read-back paced by the
// fetch bandwidth limit (with the time that takes added to the segment's deadline).
import { comparableChecksum } from "../../providers/checksum.ts";
import type { SegmentCopy } from "./copy_segment.ts";
import { verifyCopy } from "./copy_segment.ts";
import { type PhaseContext, withSegmentDeadline } from "./phase.ts";
import { type ContentProof, verifyContent } from "./verify_content.ts";

/**
 * Proves the store holds exactly `src`'s segment.
 * @throws {CopyMismatchError} a copy that is not the segment (damaged, foreign, truncated)
 * @throws {SegmentChangedError} when the local file is no longer the segment
 * @throws {StoreError} from the store (`NotFound` when an object is missing)
 */
export async function proveCopy(ctx: PhaseContext, src: SegmentCopy): Promise<ContentProof> {
  const head = await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store, signal) => verifyCopy(store, src, { checksums: true, signal }),
  );
  const rate = ctx.readBandwidth?.rate ?? Infinity;
  const readBackMs = !comparableChecksum(head.checksums) && Number.isFinite(rate) && rate > 0
    ? (src.meta.size / rate) * 1000
    : 0;
  const proof = await withSegmentDeadline(
    ctx,
    "housekeeping",
    (store, signal) =>
      verifyContent(store, head, {
        path: src.logPath,
        size: src.meta.size,
        checksum: src.meta.checksum,
      }, { signal, bandwidth: ctx.readBandwidth }),
    readBackMs,
  );
  if (proof.setAside) {
    ctx.log.warn("the store's checksum of a copy differs from its bytes'; read back, it is whole", {
      key: src.keys.log,
      stored: proof.setAside,
      bytes_read: proof.bytesRead,
    });
  }
  ctx.log.debug("remote copy's bytes verified", {
    key: src.keys.log,
    method: proof.method,
    algorithm: proof.algorithm,
    stored_checksum_set_aside: proof.setAside,
    bytes_read: proof.bytesRead,
    requests: proof.requests,
  });
  return proof;
}
