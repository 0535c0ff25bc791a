// A recorded copy checked with HEADs: the `.log` object's size and metadata must still describe
// the segment the journal recorded, and its `.index` must be there with its size. One NotFound is
// not enough to call an object gone: the absence is confirmed (a HEAD, then a listing). The
// verify pass of housekeeping and `tierd verify` both ask it; what is then done about a problem
// is theirs.
import { probeAbsence } from "../../providers/absence.ts";
import { type ObjectHead, type ObjectStore, StoreError } from "../../providers/types.ts";
import type { FormatName } from "../format/types.ts";
import { fromUserMetadata, sameSegment } from "../layout/object_metadata.ts";
import type { SegmentFacts } from "../layout/segment_facts.ts";

/** What is wrong with a remote copy. */
export interface CopyProblem {
  key: string;
  /**
   * `missing`: confirmed gone (a HEAD, then a listing); `mismatched`: it describes other bytes;
   * `unreadable`: the store lists it but answers NotFound to a HEAD (not counted as missing).
   */
  kind: "missing" | "mismatched" | "unreadable";
  /** For `mismatched`: which part differs (`size` of either object, or the `.log`'s `metadata`). */
  differs?: "size" | "metadata";
  detail: string;
}

/** A copy as its HEADs found it: a problem, or both objects' HEADs. */
export type CopyCheck =
  | { problem: CopyProblem; log?: undefined; index?: undefined }
  | { problem?: undefined; log: ObjectHead; index: ObjectHead };

/** Options of {@linkcode checkCopy}. */
export interface CheckCopyOptions {
  /** Ask the `.log`'s HEAD for the checksums the store keeps (for `verifyContent`). */
  checksums?: boolean;
  signal?: AbortSignal;
}

/**
 * HEADs a copy's two objects and compares them with the journal's facts.
 * @param store where the copy is
 * @param keys the copy's `.log` and `.index` keys
 * @param meta the facts the journal recorded for the copy
 * @param format the partition's format; when unknown, the `.log`'s own is taken
 * @returns the problem, or both HEADs when the copy is as recorded
 * @throws {StoreError} a store fault (anything but a confirmed absence)
 */
export async function checkCopy(
  store: ObjectStore,
  keys: { log: string; index: string },
  meta: SegmentFacts,
  format: FormatName | undefined,
  options: CheckCopyOptions = {},
): Promise<CopyCheck> {
  const { signal } = options;
  const log = await headOfSize(store, keys.log, "object", meta.size, {
    checksums: options.checksums,
    signal,
  });
  if ("problem" in log) return log;
  const head = log.head;
  try {
    const remote = fromUserMetadata(keys.log, head.metadata);
    if (!sameSegment(remote, { ...meta, format: format ?? remote.format })) {
      return {
        problem: {
          key: keys.log,
          kind: "mismatched",
          differs: "metadata",
          detail: "its metadata describes other bytes than the verified copy",
        },
      };
    }
  } catch (err) {
    return {
      problem: {
        key: keys.log,
        kind: "mismatched",
        differs: "metadata",
        detail: (err as Error).message,
      },
    };
  }
  const index = await headOfSize(store, keys.index, "index object", meta.indexSize, { signal });
  if ("problem" in index) return index;
  return { log: head, index: index.head };
}

/**
 * HEADs one of a copy's objects (`noun` names it in the problem: "object", "index object") and
 * checks it is there with the size the journal recorded.
 */
async function headOfSize(
  store: ObjectStore,
  key: string,
  noun: string,
  size: number,
  options: { checksums?: boolean; signal?: AbortSignal },
): Promise<{ head: ObjectHead } | { problem: CopyProblem }> {
  const head = await headOrMissing(store, key, options);
  if (head === "gone") return { problem: { key, kind: "missing", detail: `the ${noun} is gone` } };
  if (head === "unreadable") {
    return {
      problem: {
        key,
        kind: "unreadable",
        detail: `the store lists the ${noun} but answers NotFound to a HEAD of it`,
      },
    };
  }
  if (head.size !== size) {
    return {
      problem: {
        key,
        kind: "mismatched",
        differs: "size",
        detail: `${noun} is ${head.size} bytes, the copy was ${size}`,
      },
    };
  }
  return { head };
}

/**
 * The object's HEAD; `gone` once its absence is confirmed (a HEAD, then a listing: one NotFound
 * is not enough), `unreadable` when the store lists it but cannot HEAD it.
 */
async function headOrMissing(
  store: ObjectStore,
  key: string,
  options: { checksums?: boolean; signal?: AbortSignal },
): Promise<ObjectHead | "gone" | "unreadable"> {
  for (let attempt = 0;; attempt++) {
    try {
      return await store.head(key, options);
    } catch (err) {
      if (!(err instanceof StoreError && err.kind === "NotFound")) throw err;
    }
    const where = await probeAbsence(store, key, { signal: options.signal });
    if (where === "absent") return "gone";
    if (where === "listed") return "unreadable";
    // Found on a second look: the store wavered. HEAD it once more for its facts.
    if (attempt > 0) return "unreadable";
  }
}
