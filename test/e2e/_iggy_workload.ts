// What the e2e suite sends to a real Iggy server, generated from a seed: messages of 1 B to
// 60 KB (and one over 1 MiB, sent alone), ids across the u128 range, typed user headers of every
// kind, grouped into batches that stay under the HTTP API's 2 MiB body limit.
import { seededRandom } from "../../src/base/rng.ts";
import { type IggyHeaderEntry, type OutgoingMessage, toBase64 } from "./_iggy_http.ts";

/** A header as tierd's `format=json` renders it (src/read/json.ts). */
export interface ExpectedHeader {
  key: string | number | boolean;
  key_kind: string;
  value: string | number | boolean;
  value_kind: string;
}

/** A generated message with both renderings of its headers. */
export interface WorkloadMessage extends OutgoingMessage {
  /** The same headers as tierd's JSON must show them. */
  expectedHeaders: ExpectedHeader[];
}

/** Messages bound for one partition in one request. */
export interface WorkloadBatch {
  partition: number;
  messages: WorkloadMessage[];
}

/** Largest regular payload. */
export const MAX_SMALL_PAYLOAD = 60_000;
/** The one payload over 1 MiB (its base64 still fits the 2 MiB body limit). */
export const BIG_PAYLOAD = 1_200_000;
/** Raw payload bytes per request, so base64 and JSON stay well under 2 MiB. */
const BATCH_BYTES = 1_000_000;
/** Few per request: a 0.9 read of any offset answers its whole batch, so batches stay small. */
const BATCH_MESSAGES = 16;
const U128_MAX = (1n << 128n) - 1n;

interface Typed {
  kind: string;
  bytes: Uint8Array;
  json: string | number | boolean;
}

/** A seeded source of messages; successive calls continue the same sequence. */
export class Workload {
  readonly #random: () => number;
  #serial = 0;
  #turn = 0;

  constructor(seed: number) {
    this.#random = seededRandom(seed);
  }

  /**
   * `count` messages in batches that take turns over `partitions` (the turn carries over to the
   * next call), the first batch holding the one big message alone when `big` is set.
   */
  batches(count: number, partitions: number, o: { big?: boolean } = {}): WorkloadBatch[] {
    const out: WorkloadBatch[] = [];
    if (o.big) {
      out.push({ partition: this.#turn++ % partitions, messages: [this.message(BIG_PAYLOAD)] });
      count--;
    }
    let current: WorkloadBatch | undefined;
    let bytes = 0;
    for (let i = 0; i < count; i++) {
      const m = this.message(this.#size());
      if (
        !current || current.messages.length >= BATCH_MESSAGES ||
        bytes + m.payload.length > BATCH_BYTES
      ) {
        current = { partition: this.#turn++ % partitions, messages: [] };
        out.push(current);
        bytes = 0;
      }
      current.messages.push(m);
      bytes += m.payload.length;
    }
    return out;
  }

  /** One message with a `size`-byte payload. */
  message(size: number): WorkloadMessage {
    const n = this.#serial++;
    const headers: IggyHeaderEntry[] = [];
    const expectedHeaders: ExpectedHeader[] = [];
    const entries = n % 5 === 4 ? 0 : 1 + Math.floor(this.#random() * 4);
    const usedKeys = new Set<string>();
    for (let i = 0; i < entries; i++) {
      const key = i === 0 ? this.#typed("string", `k-${n}`) : this.#typed(this.#keyKind());
      const id = `${key.kind}:${toBase64(key.bytes)}`;
      if (usedKeys.has(id)) continue; // a header map keeps one value per key
      usedKeys.add(id);
      const value = this.#typed(KINDS[Math.floor(this.#random() * KINDS.length)]);
      headers.push({
        key: { kind: key.kind, value: toBase64(key.bytes) },
        value: { kind: value.kind, value: toBase64(value.bytes) },
      });
      expectedHeaders.push({
        key: key.json,
        key_kind: key.kind,
        value: value.json,
        value_kind: value.kind,
      });
    }
    return { id: this.#id(n), payload: this.#bytes(size), headers, expectedHeaders };
  }

  /** Ids from 1 to 2^128 − 1: fixed edges first, then random values of every magnitude. */
  #id(n: number): bigint {
    const edges = [U128_MAX, 1n, 1n << 64n, (1n << 64n) - 1n, 1n << 127n, U128_MAX - 1n];
    if (n < edges.length) return edges[n];
    const bits = 1 + Math.floor(this.#random() * 128);
    let id = 0n;
    for (let i = 0; i < 4; i++) id = (id << 32n) | BigInt(Math.floor(this.#random() * 2 ** 32));
    id &= (1n << BigInt(bits)) - 1n;
    return id === 0n ? BigInt(n + 1) : id; // 0 asks the server to pick an id
  }

  /** Log-uniform sizes from 1 B to 60 KB, with both ends hit now and then. */
  #size(): number {
    const r = this.#random();
    if (r < 0.02) return 1;
    if (r < 0.04) return MAX_SMALL_PAYLOAD;
    return Math.max(1, Math.round(Math.exp(this.#random() * Math.log(MAX_SMALL_PAYLOAD))));
  }

  #bytes(size: number): Uint8Array {
    const out = new Uint8Array(size);
    let x = (Math.floor(this.#random() * 2 ** 32) | 1) >>> 0;
    for (let i = 0; i < size; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      out[i] = x & 0xff;
    }
    return out;
  }

  #keyKind(): string {
    return ["string", "uint32", "raw", "int64"][Math.floor(this.#random() * 4)];
  }

  #typed(kind: string, text?: string): Typed {
    const r = this.#random;
    const big = (bits: number) => {
      let v = 0n;
      for (let i = 0; i < bits / 32; i++) v = (v << 32n) | BigInt(Math.floor(r() * 2 ** 32));
      return v;
    };
    const fixed = (size: number, write: (v: DataView) => void) => {
      const bytes = new Uint8Array(size);
      write(new DataView(bytes.buffer));
      return bytes;
    };
    switch (kind) {
      case "string": {
        const s = text ?? `v-${Math.floor(r() * 1e9)}-ünï-✓`.slice(0, 1 + Math.floor(r() * 20));
        return { kind, bytes: new TextEncoder().encode(s), json: s };
      }
      case "raw": {
        const bytes = this.#bytes(1 + Math.floor(r() * 255));
        return { kind, bytes, json: toBase64(bytes) };
      }
      case "bool": {
        const b = r() < 0.5;
        return { kind, bytes: Uint8Array.of(b ? 1 : 0), json: b };
      }
      case "int8":
      case "int16":
      case "int32": {
        const bits = Number(kind.slice(3));
        const v = Math.floor(r() * 2 ** bits) - 2 ** (bits - 1);
        const bytes = fixed(
          bits / 8,
          (d) =>
            bits === 8
              ? d.setInt8(0, v)
              : bits === 16
              ? d.setInt16(0, v, true)
              : d.setInt32(0, v, true),
        );
        return { kind, bytes, json: v };
      }
      case "uint8":
      case "uint16":
      case "uint32": {
        const bits = Number(kind.slice(4));
        const v = Math.floor(r() * 2 ** bits);
        const bytes = fixed(
          bits / 8,
          (d) =>
            bits === 8
              ? d.setUint8(0, v)
              : bits === 16
              ? d.setUint16(0, v, true)
              : d.setUint32(0, v, true),
        );
        return { kind, bytes, json: v };
      }
      case "int64":
      case "uint64": {
        const u = big(64);
        const v = kind === "int64" ? BigInt.asIntN(64, u) : u;
        return { kind, bytes: fixed(8, (d) => d.setBigUint64(0, u, true)), json: v.toString() };
      }
      case "int128":
      case "uint128": {
        const u = big(128);
        const v = kind === "int128" ? BigInt.asIntN(128, u) : u;
        const bytes = fixed(16, (d) => {
          d.setBigUint64(0, u & ((1n << 64n) - 1n), true);
          d.setBigUint64(8, u >> 64n, true);
        });
        return { kind, bytes, json: v.toString() };
      }
      case "float32": {
        const v = (Math.floor(r() * 2 ** 16) - 2 ** 15) / 8; // exact in 32 bits
        return { kind, bytes: fixed(4, (d) => d.setFloat32(0, v, true)), json: v };
      }
      case "float64": {
        const v = (r() - 0.5) * 1e12;
        return { kind, bytes: fixed(8, (d) => d.setFloat64(0, v, true)), json: v };
      }
    }
    throw new Error(`no generator for header kind ${kind}`);
  }
}

/** Every header kind Iggy has. */
const KINDS = [
  "raw",
  "string",
  "bool",
  "int8",
  "int16",
  "int32",
  "int64",
  "int128",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "uint128",
  "float32",
  "float64",
];
