// The worker thread of providers/fetch_workers.ts: sends a store GET with the same deadlines the
// event loop's transport keeps (the first byte within `firstByteMs`, no silence of the body longer
// than `stallMs`: deadline_fetch.ts), reads the body whole as sendHttp would, and hands the bytes
// back by transfer, so the main thread never touches a piece of it.
import { createXXHash3, type IHasher } from "hash-wasm";
import { nativeXxh3, wasmXxh3_64 } from "../src/base/xxh3.ts";
import { deadlineFetch } from "./deadline_fetch.ts";
import { bodyWatchOf, declaredLength, readBody, WATCHES_BODY } from "./http.ts";
import type { WorkerAnswer, WorkerAsk } from "./fetch_workers.ts";

/** The worker's own scope: `postMessage` with a transfer list, and the inbox. */
interface WorkerScope {
  postMessage(message: WorkerAnswer, transfer?: Transferable[]): void;
  onmessage: ((event: MessageEvent<WorkerAsk>) => void) | null;
}

const scope = globalThis as unknown as WorkerScope;
const inFlight = new Map<number, AbortController>();

scope.onmessage = (event) => {
  const ask = event.data;
  if (ask.type === "abort") inFlight.get(ask.id)?.abort();
  else void get(ask);
};

async function get(ask: Extract<WorkerAsk, { type: "get" }>): Promise<void> {
  const controller = new AbortController();
  inFlight.set(ask.id, controller);
  try {
    const fetchFn = deadlineFetch((input, init) => globalThis.fetch(input, init), {
      firstByteMs: ask.firstByteMs,
      stallMs: ask.stallMs,
    });
    const response = await fetchFn(ask.url, {
      method: "GET",
      headers: ask.headers,
      redirect: "manual",
      signal: controller.signal,
      [WATCHES_BODY]: true,
    } as RequestInit);
    const watch = bodyWatchOf(response);
    let bytes: Uint8Array = new Uint8Array(0);
    let overlong = false;
    try {
      if (response.body) {
        const expected = declaredLength(response.headers);
        const length = Number.isSafeInteger(expected) ? expected : undefined;
        ({ bytes, overlong } = await readBody(response.body, length, watch));
      }
    } finally {
      watch?.done();
    }
    const headers: [string, string][] = [];
    response.headers.forEach((value, name) => headers.push([name, value]));
    const blockSums = ask.blockSize ? await sumsOf(bytes, ask.blockSize) : undefined;
    const transfer: Transferable[] = [bytes.buffer as ArrayBuffer];
    if (blockSums) transfer.push(blockSums.buffer as ArrayBuffer);
    scope.postMessage({
      type: "done",
      id: ask.id,
      status: response.status,
      statusText: response.statusText,
      headers,
      body: bytes.buffer as ArrayBuffer,
      offset: bytes.byteOffset,
      length: bytes.byteLength,
      overlong,
      blockSums,
    }, transfer);
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    scope.postMessage({
      type: "failed",
      id: ask.id,
      name: e.name,
      message: e.message,
      cause: e.cause instanceof Error ? e.cause.message : undefined,
    });
  } finally {
    inFlight.delete(ask.id);
  }
}

let wasmXxh3: Promise<IHasher> | undefined;

/** XXH3-64 (seed 0) of each `blockSize` block of `bytes`: the chunk format's block checksums. */
async function sumsOf(bytes: Uint8Array, blockSize: number): Promise<BigUint64Array> {
  const sums = new BigUint64Array(Math.ceil(bytes.length / blockSize));
  const h = nativeXxh3 ? undefined : await (wasmXxh3 ??= createXXHash3());
  for (let b = 0; b < sums.length; b++) {
    const block = bytes.subarray(b * blockSize, Math.min(bytes.length, (b + 1) * blockSize));
    sums[b] = nativeXxh3 ? nativeXxh3(block) : wasmXxh3_64(h!, [block]);
  }
  return sums;
}
