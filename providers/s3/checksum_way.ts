// How an S3-compatible store takes checksums: which one goes with every body, what a multipart
// upload declares, and whether a HEAD may ask for the stored ones. Configured outright, or settled
// by trying: `auto` puts a small probe object under the prefix with each checksum in turn (the
// fastest first), reads back what the store keeps, does the same with a one-part multipart upload,
// and deletes what it wrote. A store that refuses a header (Backblaze B2 answers `400
// InvalidArgument: Unsupported header 'x-amz-checksum-crc64nvme'`, OpenStack Swift's s3api 501)
// never sees it again; one that refuses them all gets `Content-MD5`, which every S3
// implementation checks, and its copies are proven by read-back or by an ETag that is an MD5.
import { checksumOf, comparableChecksum, sameChecksum } from "../checksum.ts";
import { type ChecksumAlgorithm, type ObjectHead, type ObjectStore, StoreError } from "../types.ts";

/** `tiered_storage.s3.checksum`: an algorithm, none, or settled by the probe. */
export type S3ChecksumMode = "auto" | ChecksumAlgorithm | "none";

/** How uploads carry checksums and copies are checked, once settled. */
export interface S3ChecksumWay {
  /** Sent with every PUT and part: `x-amz-checksum-{alg}`, `Content-MD5` for md5, or nothing. */
  body: ChecksumAlgorithm | "none";
  /**
   * Declared on CreateMultipartUpload and sent with each part: CRCs as a full-object checksum,
   * SHA-256 as a composite one, MD5 as each part's `Content-MD5` (nothing declared), or nothing.
   */
  multipart: ChecksumAlgorithm | "none";
  /** HEADs that want the stored checksums send `x-amz-checksum-mode: ENABLED`. */
  headMode: boolean;
}

/** What `auto` found, for `tierd probe`. */
export interface ChecksumReport {
  way: S3ChecksumWay;
  /** How a copy of one PUT is proven before eviction. */
  singleProof: string;
  /** How a copy of a multipart upload is proven. */
  multipartProof: string;
  /** What the store refused on the way, e.g. `x-amz-checksum-crc64nvme on PUT (400 InvalidArgument)`. */
  refused: string[];
}

/** The algorithms S3 takes in `x-amz-checksum-*`; the rest (md5) goes as `Content-MD5`. */
export function isAmzChecksum(
  a: ChecksumAlgorithm | "none",
): a is "crc32" | "crc64nvme" | "crc32c" | "sha256" {
  return a === "crc32" || a === "crc64nvme" || a === "crc32c" || a === "sha256";
}

/** The way of an explicit mode. */
export function wayOf(mode: Exclude<S3ChecksumMode, "auto">): S3ChecksumWay {
  return { body: mode, multipart: mode, headMode: isAmzChecksum(mode) };
}

/** The order `auto` tries them in: the fastest to compute first, Content-MD5 last. */
const TRIED: readonly ChecksumAlgorithm[] = ["crc32", "crc64nvme", "crc32c", "sha256", "md5"];

/** True for an answer that refuses the request as built (a header it does not take). */
export function refusedHeader(err: unknown): err is StoreError {
  return err instanceof StoreError && (err.detail.status === 400 || err.detail.status === 501 ||
    err.kind === "Unsupported");
}

function refusal(what: string, err: StoreError): string {
  return `${what} (${err.detail.status ?? "?"} ${err.detail.code ?? err.kind})`;
}

/** A store that sends checksums `way`'s way, for one step of the probe. */
export type CandidateStore = (way: S3ChecksumWay) => ObjectStore;

/**
 * Settles `auto` by trying each checksum on a probe key in `dir` (a key prefix ending in `/`).
 * @param candidate a store over the same bucket sending checksums the given way
 * @throws {StoreError} when even a put without any checksum fails (the probe's real reason)
 */
export async function negotiateChecksumWay(
  candidate: CandidateStore,
  dir: string,
  options: { signal?: AbortSignal } = {},
): Promise<ChecksumReport> {
  const signal = options.signal;
  const key = `${dir}checksum-${crypto.randomUUID()}`;
  const partsKey = `${key}-multipart`;
  const bytes = crypto.getRandomValues(new Uint8Array(1024));
  const refused: string[] = [];
  const written: string[] = [];
  try {
    // One PUT with each checksum until the store takes one.
    let body: ChecksumAlgorithm | "none" = "none";
    for (const algorithm of TRIED) {
      const header = isAmzChecksum(algorithm) ? `x-amz-checksum-${algorithm}` : "Content-MD5";
      try {
        await candidate({ body: algorithm, multipart: "none", headMode: false })
          .put(key, bytes, { signal });
        body = algorithm;
        break;
      } catch (err) {
        if (!refusedHeader(err)) throw err;
        refused.push(refusal(`${header} on PUT`, err));
      }
    }
    if (body === "none") await candidate(wayOf("none")).put(key, bytes, { signal });
    written.push(key);

    // Does a HEAD answer it back, of the right shape and value?
    let headMode = false;
    let singleProof = "read-back";
    const ours = body === "none" ? undefined : await checksumOf(body, bytes);
    let head: ObjectHead | undefined;
    if (isAmzChecksum(body)) {
      try {
        head = await candidate({ body, multipart: "none", headMode: true })
          .head(key, { checksums: true, signal });
        const stored = comparableChecksum(head.checksums);
        if (stored && ours && stored.algorithm === body && sameChecksum(ours, stored)) {
          headMode = true;
          singleProof = `the stored ${body}`;
        }
      } catch (err) {
        if (!refusedHeader(err)) throw err;
        refused.push(refusal("x-amz-checksum-mode on HEAD", err));
      }
    }
    if (!headMode) {
      // Without a stored checksum, a single PUT's ETag may be its MD5 (the HEAD above, if any,
      // answered it too).
      head ??= await candidate({ body, multipart: "none", headMode: false })
        .head(key, { checksums: true, signal });
      const etag = comparableChecksum(head.checksums?.filter((c) => c.algorithm === "md5"));
      if (etag && sameChecksum(await checksumOf("md5", bytes), etag)) {
        singleProof = "the ETag (MD5)";
      }
    }

    // A one-part multipart upload, declaring the checksum; without, if the store refuses that.
    let multipart: ChecksumAlgorithm | "none" = body;
    let multipartProof = "read-back";
    for (const tried of body === "none" ? ["none" as const] : [body, "none" as const]) {
      const store = candidate({ body, multipart: tried, headMode });
      let uploadId: string | undefined;
      try {
        uploadId = await store.createMultipart(partsKey, { signal });
        const part = await store.putPart(partsKey, uploadId, 1, bytes, { signal });
        await store.completeMultipart(partsKey, uploadId, [part], { signal });
        uploadId = undefined;
        written.push(partsKey);
        multipart = tried;
        const head = await store.head(partsKey, { checksums: true, signal });
        const stored = comparableChecksum(head.checksums);
        if (stored && tried !== "none" && stored.algorithm === tried && ours) {
          if (sameChecksum(ours, stored)) multipartProof = `the stored ${tried}`;
        }
        break;
      } catch (err) {
        if (uploadId) await store.abortMultipart(partsKey, uploadId, { signal }).catch(() => {});
        if (tried === "none" || !refusedHeader(err)) throw err;
        refused.push(refusal(`${tried} on a multipart upload`, err));
      }
    }
    return {
      way: { body, multipart, headMode },
      singleProof,
      multipartProof,
      refused,
    };
  } finally {
    if (written.length > 0) {
      await candidate(wayOf("none")).deleteMany(written, { signal }).catch(() => {});
    }
  }
}

/** One line for `tierd probe`: what is sent and how copies are proven. */
export function describeChecksumWay(report: ChecksumReport): string {
  const { way } = report;
  const sent = way.body === "none"
    ? "no checksum"
    : isAmzChecksum(way.body)
    ? `x-amz-checksum-${way.body}`
    : "Content-MD5";
  const refused = report.refused.length > 0 ? `; refused: ${report.refused.join(", ")}` : "";
  return `checksum ${way.body} (${sent} with every upload; multipart ${way.multipart}); copies ` +
    `proven by ${report.singleProof} (multipart: ${report.multipartProof})${refused}`;
}
