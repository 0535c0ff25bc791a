// The CRC-32 of each part an upload will send, taken by the verify pass as it reads the segment.
// The upload reads the file again to send it; what it sends must be the bytes that were verified,
// or a segment changed in place between the two reads would be published under the first read's
// checksum. Checking each part read against its CRC-32 (the runtime's own, about 20 GB/s here)
// costs a fraction of hashing the whole file again with XXH3-128.
import { crc32 } from "../../providers/checksum.ts";

/** The CRC-32 of each part of a file, as the upload cuts it. */
export interface PartChecks {
  /** Bytes per part (the last part may be shorter). */
  partSize: number;
  /** One per part, in order; a file of at most `partSize` bytes has one. */
  crc32: readonly number[];
}

/** Takes {@link PartChecks} from a file's bytes fed in order, in chunks of any size. */
export class PartCrc32 {
  readonly #partSize: number;
  readonly #done: number[] = [];
  #running = 0;
  #inPart = 0;

  /** @param partSize the upload's part size for this file (`uploadPartSize`) */
  constructor(partSize: number) {
    if (!Number.isSafeInteger(partSize) || partSize < 1) {
      throw new RangeError(`part size ${partSize} is not a positive whole number of bytes`);
    }
    this.#partSize = partSize;
  }

  update(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.length) {
      const take = Math.min(bytes.length - at, this.#partSize - this.#inPart);
      this.#running = crc32(bytes.subarray(at, at + take), this.#running);
      this.#inPart += take;
      at += take;
      if (this.#inPart === this.#partSize) {
        this.#done.push(this.#running);
        this.#running = 0;
        this.#inPart = 0;
      }
    }
  }

  /** The checks of everything fed; an empty file has one part (the upload sends one put). */
  finish(): PartChecks {
    const crcs = [...this.#done];
    if (this.#inPart > 0 || crcs.length === 0) crcs.push(this.#running);
    return { partSize: this.#partSize, crc32: crcs };
  }
}
