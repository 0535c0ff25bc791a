// BufferedMultipartWriter and uploadFile over the simulator, wrapped in a store that counts
// parts in flight, records the order of calls and fails or holds calls on demand.
import assert from "node:assert/strict";
import fc from "fast-check";
import { join } from "node:path";
import { concatBytes } from "../../../src/base/bytes.ts";
import { BufferedMultipartWriter } from "../../../providers/multipart_writer.ts";
import { uploadFile } from "../../../providers/upload.ts";
import { SimStore } from "../../../providers/sim/store.ts";
import {
  type Checksum,
  type CompletedPart,
  type ObjectStore,
  type PartOptions,
  type PutOptions,
  type PutResult,
  StoreError,
} from "../../../providers/types.ts";
import { tempDir } from "../../_util.ts";

/** Delegates to a SimStore; counts concurrency, logs calls, injects failures and holds. */
class ObservedStore implements ObjectStore {
  readonly kind = "observed";
  readonly sim: SimStore;
  readonly log: string[] = [];
  readonly partSizes: number[] = [];
  /** The checksums each call was given: by part number, and `put` for a single put. */
  readonly given = new Map<number | "put", readonly Checksum[] | undefined>();
  inFlight = 0;
  maxInFlight = 0;
  failPart?: number;
  /** When set, every putPart waits for this before it is served. */
  hold?: Promise<void>;

  constructor(minPartSize: number) {
    this.sim = new SimStore({ minPartSize });
  }

  put(key: string, body: Uint8Array, options?: PutOptions): Promise<PutResult> {
    this.log.push("put");
    this.given.set("put", options?.checksums);
    return this.sim.put(key, body, options);
  }
  get: ObjectStore["get"] = (key, options) => this.sim.get(key, options);
  head: ObjectStore["head"] = (key, options) => this.sim.head(key, options);
  deleteMany: ObjectStore["deleteMany"] = (keys, options) => this.sim.deleteMany(keys, options);
  list: ObjectStore["list"] = (prefix, options) => this.sim.list(prefix, options);
  listMultipartUploads: ObjectStore["listMultipartUploads"] = (prefix, options) =>
    this.sim.listMultipartUploads(prefix, options);

  async createMultipart(key: string, options?: Parameters<ObjectStore["createMultipart"]>[1]) {
    this.log.push("create");
    return await this.sim.createMultipart(key, options);
  }

  async putPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Uint8Array,
    options?: PartOptions,
  ): Promise<CompletedPart> {
    this.log.push(`part ${partNumber}`);
    this.given.set(partNumber, options?.checksums);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.hold) await this.hold;
      options?.signal?.throwIfAborted();
      if (partNumber === this.failPart) {
        throw new StoreError("Transport", `part ${partNumber} reset`, { op: "putPart", key });
      }
      this.partSizes[partNumber - 1] = body.byteLength;
      return await this.sim.putPart(key, uploadId, partNumber, body, options);
    } finally {
      this.inFlight--;
    }
  }

  completeMultipart: ObjectStore["completeMultipart"] = (key, uploadId, parts, options) => {
    this.log.push("complete");
    return this.sim.completeMultipart(key, uploadId, parts, options);
  };

  abortMultipart: ObjectStore["abortMultipart"] = (key, uploadId, options) => {
    this.log.push("abort");
    return this.sim.abortMultipart(key, uploadId, options);
  };
}

const PART = 1000;

function writerFor(store: ObjectStore, key = "k", options = {}) {
  return new BufferedMultipartWriter(store, key, { partSize: PART, minPartSize: PART, ...options });
}

function bytes(n: number, seed = 0): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);
}

Deno.test("multipart writer: coalesces any writes into full parts; the object is their concatenation", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 2500 }), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 5 }),
      async (sizes, concurrency) => {
        const store = new ObservedStore(PART);
        const writer = writerFor(store, "k", { concurrency });
        const chunks = sizes.map((n, i) => bytes(n, i));
        for (const chunk of chunks) await writer.write(chunk);
        const result = await writer.complete();
        assert.equal(result.status, "Created");
        const total = sizes.reduce((a, b) => a + b, 0);
        assert.deepEqual(store.sim.objects.get("k")?.bytes, concatBytes(chunks));
        assert.equal(writer.bytesWritten, total);
        if (total <= PART) {
          assert.deepEqual(store.log, ["put"], "an object of one part is a single put");
        } else {
          const parts = Math.ceil(total / PART);
          assert.equal(store.partSizes.length, parts);
          assert.ok(
            store.partSizes.slice(0, -1).every((n) => n === PART),
            "all but the last are full",
          );
          assert.ok(store.partSizes.at(-1)! > 0 && store.partSizes.at(-1)! <= PART);
          assert.ok(
            store.maxInFlight <= concurrency,
            `${store.maxInFlight} > ${concurrency} in flight`,
          );
          assert.equal(store.sim.uploads.size, 0);
        }
      },
    ),
    { numRuns: 100 },
  );
});

/** A made-up checksum naming what it was given with (the sim store checks none). */
const tag = (what: string): Checksum[] => [{ algorithm: "crc32", value: what }];

Deno.test("multipart writer: checksums handed with a part go to the store with that part", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 7 }),
      fc.integer({ min: 1, max: PART }),
      fc.array(fc.boolean(), { minLength: 7, maxLength: 7 }),
      fc.integer({ min: 1, max: 3 }),
      async (count, lastSize, withChecksums, concurrency) => {
        const store = new ObservedStore(PART);
        const writer = writerFor(store, "k", { concurrency });
        for (let i = 0; i < count; i++) {
          const part = bytes(i === count - 1 ? lastSize : PART, i);
          await writer.writePart(part, withChecksums[i] ? tag(`part ${i + 1}`) : undefined);
        }
        await writer.complete();
        if (count === 1) {
          // One part or less is a single put: it carries the part's checksums.
          assert.deepEqual(store.given.get("put"), withChecksums[0] ? tag("part 1") : undefined);
          return;
        }
        for (let n = 1; n <= count; n++) {
          assert.deepEqual(store.given.get(n), withChecksums[n - 1] ? tag(`part ${n}`) : undefined);
        }
      },
    ),
    { numRuns: 60 },
  );
});

Deno.test("multipart writer: bytes coalesced by write() carry no checksum, nor a part they join", async () => {
  const store = new ObservedStore(PART);
  const writer = writerFor(store);
  await writer.write(bytes(PART + 10));
  await writer.complete();
  assert.deepEqual([...store.given.values()], [undefined, undefined]);

  // Against the rule (parts and write() mixed): the checksums were of the part before.
  const mixed = new ObservedStore(PART);
  const w = writerFor(mixed);
  await w.writePart(bytes(PART / 2), tag("half a part"));
  await w.write(bytes(PART));
  await w.complete();
  assert.deepEqual([...mixed.given.values()], [undefined, undefined]);
});

Deno.test("uploadFile: the checksums the read verifier took of each part go with that part", async () => {
  const dir = await tempDir("tierd-upload");
  try {
    const store = new ObservedStore(PART);
    const seen: number[] = [];
    const verifyRead = {
      update: (b: Uint8Array) => {
        seen.push(b.length);
        return tag(`read ${seen.length}`);
      },
      verify() {},
    };
    const big = join(dir.path, "big.log");
    await Deno.writeFile(big, bytes(3 * PART + 5));
    await uploadFile(store, "big", big, { partSize: PART, minPartSize: PART, verifyRead });
    assert.deepEqual(seen, [PART, PART, PART, 5]);
    for (let n = 1; n <= 4; n++) assert.deepEqual(store.given.get(n), tag(`read ${n}`));

    const small = join(dir.path, "small.log");
    await Deno.writeFile(small, bytes(PART));
    await uploadFile(store, "small", small, { partSize: PART, minPartSize: PART, verifyRead });
    assert.deepEqual(store.given.get("put"), tag("read 5"));
  } finally {
    await dir.cleanup();
  }
});

Deno.test("multipart writer: exactly one part is a single put; one byte more is multipart", async () => {
  const one = new ObservedStore(PART);
  const writer = writerFor(one);
  await writer.write(bytes(PART));
  await writer.complete();
  assert.deepEqual(one.log, ["put"]);
  const two = new ObservedStore(PART);
  const more = writerFor(two);
  await more.write(bytes(PART));
  await more.write(bytes(1));
  await more.complete();
  assert.deepEqual(two.log, ["create", "part 1", "part 2", "complete"]);
  assert.deepEqual(two.partSizes, [PART, 1]);
});

Deno.test("multipart writer: at most `concurrency` parts in flight; write waits for the window", async () => {
  const store = new ObservedStore(PART);
  let release!: () => void;
  store.hold = new Promise((resolve) => (release = resolve));
  const writer = writerFor(store, "k", { concurrency: 3 });
  for (let i = 0; i < 4; i++) await writer.write(bytes(PART)); // the 4th stays buffered
  assert.equal(store.inFlight, 3);
  let fourthDone = false;
  const fourth = writer.write(bytes(PART)).then(() => (fourthDone = true));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(fourthDone, false, "the fourth part waits while three are in flight");
  assert.equal(store.inFlight, 3);
  release();
  await fourth;
  for (let i = 0; i < 5; i++) await writer.write(bytes(PART));
  await writer.complete();
  assert.equal(store.maxInFlight, 3);
  assert.equal(store.partSizes.length, 10);
});

Deno.test("multipart writer: onUploadId runs after create and before the first part", async () => {
  const store = new ObservedStore(PART);
  const writer = writerFor(store, "k", {
    onUploadId: async (id: string) => {
      await new Promise((resolve) => setTimeout(resolve, 10));
      store.log.push(`journal ${id}`);
    },
  });
  await writer.write(bytes(2500));
  await writer.complete();
  assert.deepEqual(store.log, [
    "create",
    "journal sim-00000001",
    "part 1",
    "part 2",
    "part 3",
    "complete",
  ]);
});

Deno.test("multipart writer: a failing part aborts the upload and the error surfaces", async () => {
  const store = new ObservedStore(PART);
  store.failPart = 3;
  const progress: number[] = [];
  const writer = writerFor(store, "k", {
    concurrency: 2,
    onProgress: (n: number) => progress.push(n),
  });
  const failure = (async () => {
    for (let i = 0; i < 8; i++) await writer.write(bytes(PART));
    await writer.complete();
  })();
  await assert.rejects(failure, (err: unknown) => {
    assert.ok(err instanceof StoreError && err.kind === "Transport");
    assert.match(err.message, /part 3 reset/);
    return true;
  });
  assert.ok(store.log.includes("abort"), "the upload was aborted");
  assert.ok(!store.log.includes("complete"));
  assert.equal(store.sim.uploads.size, 0, "nothing left behind");
  assert.equal(store.sim.objects.has("k"), false);
  await assert.rejects(writer.write(bytes(1)), StoreError, "the writer stays failed");
  assert.ok(progress.every((n) => n % PART === 0));
});

Deno.test("multipart writer: a failing onUploadId aborts the upload before any part", async () => {
  const store = new ObservedStore(PART);
  const writer = writerFor(store, "k", {
    onUploadId: () => {
      throw new Error("journal is full");
    },
  });
  await assert.rejects(writer.write(bytes(PART + 1)), /journal is full/);
  assert.deepEqual(store.log, ["create", "abort"]);
  assert.equal(store.sim.uploads.size, 0);
});

Deno.test("multipart writer: ifAbsent on a taken key is AlreadyExists and cleans up", async () => {
  const store = new ObservedStore(PART);
  await store.sim.put("k", bytes(10));
  const writer = writerFor(store, "k", { ifAbsent: true });
  await writer.write(bytes(2 * PART + 1));
  assert.deepEqual(await writer.complete(), { status: "AlreadyExists" });
  assert.equal(store.sim.uploads.size, 0, "the refused upload was aborted");
  assert.deepEqual(store.sim.objects.get("k")?.bytes, bytes(10));
  const small = writerFor(store, "k", { ifAbsent: true });
  await small.write(bytes(5));
  assert.deepEqual(await small.complete(), { status: "AlreadyExists" });
});

Deno.test("multipart writer: the caller's signal aborts parts and the upload", async () => {
  const store = new ObservedStore(PART);
  let release!: () => void;
  store.hold = new Promise((resolve) => (release = resolve));
  const controller = new AbortController();
  const writer = writerFor(store, "k", { signal: controller.signal, concurrency: 2 });
  await writer.write(bytes(2 * PART));
  controller.abort();
  release();
  await assert.rejects(writer.complete(), (err: unknown) => err instanceof DOMException);
  assert.equal(store.sim.uploads.size, 0);
  assert.ok(store.log.includes("abort"));
});

Deno.test("multipart writer: abort() cancels; validation of sizes", async () => {
  const store = new ObservedStore(PART);
  const writer = writerFor(store, "k");
  await writer.write(bytes(1500));
  await writer.abort();
  assert.equal(store.sim.uploads.size, 0);
  await assert.rejects(writer.write(bytes(1)), (err: unknown) => err instanceof DOMException);
  assert.throws(() => new BufferedMultipartWriter(store, "k", { partSize: 1024 }), RangeError);
  assert.throws(() => writerFor(store, "k", { concurrency: 0 }), RangeError);
  const parts = writerFor(store, "p");
  await parts.write(bytes(10));
  await assert.rejects(parts.writePart(bytes(PART)), RangeError, "writePart with bytes buffered");
  const short = writerFor(store, "q");
  await short.writePart(bytes(10));
  await assert.rejects(short.writePart(bytes(PART)), RangeError, "a short part must be the last");
});

Deno.test("uploadFile: one put up to partSize, multipart beyond, positional reads", async () => {
  const dir = await tempDir("tierd-upload");
  try {
    const small = join(dir.path, "small.log");
    await Deno.writeFile(small, bytes(PART));
    const store = new ObservedStore(PART);
    const progress: number[] = [];
    const put = await uploadFile(store, "small", small, {
      partSize: PART,
      minPartSize: PART,
      onProgress: (n) => progress.push(n),
    });
    assert.equal(put.status, "Created");
    assert.deepEqual(store.log, ["put"]);
    assert.deepEqual(progress, [PART]);

    const big = join(dir.path, "big.log");
    await Deno.writeFile(big, bytes(5 * PART + 123, 7));
    const ids: string[] = [];
    const result = await uploadFile(store, "big", big, {
      partSize: PART,
      minPartSize: PART,
      concurrency: 2,
      metadata: { size: String(5 * PART + 123) },
      onUploadId: (id) => void ids.push(id),
    });
    assert.equal(result.status, "Created");
    assert.deepEqual(store.sim.objects.get("big")?.bytes, bytes(5 * PART + 123, 7));
    assert.deepEqual(store.partSizes, [PART, PART, PART, PART, PART, 123]);
    assert.equal(ids.length, 1);
    assert.equal(store.sim.objects.get("big")?.metadata.size, String(5 * PART + 123));
    assert.ok(store.maxInFlight <= 2);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("uploadFile: the part size grows to stay within 10,000 parts", async () => {
  const dir = await tempDir("tierd-upload");
  try {
    const path = join(dir.path, "many.log");
    await Deno.writeFile(path, bytes(20_001));
    const store = new ObservedStore(1);
    await uploadFile(store, "many", path, { partSize: 1, minPartSize: 1, concurrency: 8 });
    assert.equal(store.partSizes.length, 6667);
    assert.equal(store.partSizes[0], 3);
    assert.deepEqual(store.sim.objects.get("many")?.bytes, bytes(20_001));
  } finally {
    await dir.cleanup();
  }
});

Deno.test("uploadFile: a failed part aborts the upload", async () => {
  const dir = await tempDir("tierd-upload");
  try {
    const path = join(dir.path, "x.log");
    await Deno.writeFile(path, bytes(4 * PART));
    const store = new ObservedStore(PART);
    store.failPart = 2;
    await assert.rejects(
      uploadFile(store, "x", path, { partSize: PART, minPartSize: PART }),
      (err: unknown) => err instanceof StoreError && err.kind === "Transport",
    );
    assert.equal(store.sim.uploads.size, 0);
    assert.ok(store.log.includes("abort"));
  } finally {
    await dir.cleanup();
  }
});
