// The one contract every ObjectStore backend passes: fs and sim always, MinIO,
// Azurite and fake-gcs-server wherever they start. Each case works under its own key prefix of a
// random run id, so the suite can run against a shared bucket, and removes what it wrote.
// A backend that cannot pass a case names it in `exceptions` with the reason, printed loudly.
import { FetchWorkers } from "../../providers/fetch_workers.ts";
import assert from "node:assert/strict";
import {
  type ChecksumAlgorithm,
  type ObjectStore,
  type PutResult,
  StoreError,
  type StoreErrorKind,
} from "../../providers/types.ts";
import { checksumOf } from "../../providers/checksum.ts";
import type { ObjectInfo } from "../../providers/types.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { randomBytes } from "../providers/_bytes.ts";

/** The cases of the contract, for `exceptions`. */
export type ContractCase =
  | "put-get-round-trip"
  | "put-overwrites"
  | "put-if-absent"
  | "put-if-absent-race"
  | "put-if-match"
  | "put-if-match-race"
  | "ranged-get"
  | "missing-key"
  | "head-metadata"
  | "delete-many"
  | "list-prefix"
  | "list-paging"
  | "list-utf8-order"
  | "multipart-complete"
  | "multipart-abort"
  | "multipart-list-uploads"
  | "multipart-if-absent"
  | "head-checksums"
  | "special-keys";

/**
 * What a store's versions follow (`ObjectHead.version`): `per-put`, a new version on every put,
 * the same bytes put again included (GCS generations, Azure ETags, fs, sim); `per-content`, a
 * version derived from the bytes, which the same bytes put again keep (S3, whose version is the
 * ETag, the MD5 of the bytes).
 */
export type VersionScheme = "per-put" | "per-content";

/** What a case gets: the store and a key prefix no other case or run uses. */
interface CaseContext {
  store: ObjectStore;
  prefix: string;
  /** The checksum the store keeps with every object tierd uploads, if it keeps one. */
  checksum?: ChecksumAlgorithm;
  versions: VersionScheme;
}

const MiB = 1024 * 1024;

const CASES: Record<ContractCase, (ctx: CaseContext) => Promise<void>> = {
  async "put-get-round-trip"({ store, prefix }) {
    for (const size of [0, 1, MiB]) {
      const key = `${prefix}object-${size}`;
      const body = randomBytes(size);
      const put = await store.put(key, body);
      assert.equal(put.status, "Created");
      const got = await store.get(key);
      assert.equal(got.size, size);
      assertBytes(got.bytes, body, `${size}-byte object`);
    }
  },

  async "put-overwrites"({ store, prefix }) {
    const key = `${prefix}object`;
    await store.put(key, bytesOf("first"), { metadata: { generation: "1" } });
    const second = await store.put(key, bytesOf("second, longer"), {
      metadata: { generation: "2" },
    });
    assert.equal(second.status, "Created");
    assertBytes((await store.get(key)).bytes, bytesOf("second, longer"));
    const head = await store.head(key);
    assert.equal(head.size, 14);
    assert.equal(head.metadata.generation, "2");
  },

  async "put-if-absent"({ store, prefix }) {
    const key = `${prefix}object`;
    const first = await store.put(key, bytesOf("original"), {
      ifAbsent: true,
      metadata: { owner: "first" },
    });
    assert.equal(first.status, "Created");
    const second = await store.put(key, bytesOf("intruder"), {
      ifAbsent: true,
      metadata: { owner: "second" },
    });
    assert.equal(second.status, "AlreadyExists");
    assertBytes((await store.get(key)).bytes, bytesOf("original"));
    assert.equal((await store.head(key)).metadata.owner, "first");
  },

  async "put-if-absent-race"({ store, prefix }) {
    const key = `${prefix}object`;
    const bodies = Array.from({ length: 8 }, (_, i) => randomBytes(64 * 1024 + i));
    const results = await Promise.all(
      bodies.map((body, i) =>
        store.put(key, body, { ifAbsent: true, metadata: { writer: String(i) } })
      ),
    );
    const winners = results.flatMap((r, i) => r.status === "Created" ? [i] : []);
    assert.equal(winners.length, 1, `exactly one creator wins, got ${winners.length}`);
    assert.ok(results.every((r) => r.status === "Created" || r.status === "AlreadyExists"));
    const [winner] = winners;
    assertBytes((await store.get(key)).bytes, bodies[winner], "the winner's body");
    assert.equal((await store.head(key)).metadata.writer, String(winner), "the winner's metadata");
  },

  async "put-if-match"({ store, prefix, versions }) {
    const key = `${prefix}owner`;
    const first = await store.put(key, bytesOf("owner 1, nonce 5f3a"), {
      metadata: { owner: "1" },
    });
    const v1 = (await store.head(key)).version;
    assert.ok(v1, "HEAD reports a version");
    assert.equal(createdVersion(first), v1, "the put answers the version HEAD reports");
    assert.equal((await store.get(key)).version, v1, "GET reports the version HEAD reports");
    const range = { start: 1, length: 3 };
    assert.equal((await store.get(key, { range })).version, v1, "so does a ranged GET");

    const second = await store.put(key, bytesOf("owner 2, nonce 9c01"), {
      ifMatch: v1,
      metadata: { owner: "2" },
    });
    const v2 = createdVersion(second);
    assert.ok(v2 !== undefined && v2 !== v1, `a replacement gets a new version: ${v1} -> ${v2}`);
    assert.equal((await store.head(key)).version, v2);

    await assertStoreError(
      store.put(key, bytesOf("owner 3, nonce 77d2"), { ifMatch: v1, metadata: { owner: "3" } }),
      "PreconditionFailed",
      "a replacement with the old version",
    );
    assertBytes((await store.get(key)).bytes, bytesOf("owner 2, nonce 9c01"), "after the refusal");
    const after = await store.head(key);
    assert.equal(after.metadata.owner, "2", "the refused replacement left the metadata alone");
    assert.equal(after.version, v2, "and the version");

    const absent = `${prefix}absent`;
    await assertStoreError(
      store.put(absent, bytesOf("no one here"), { ifMatch: v2 }),
      "PreconditionFailed",
      "a replacement of an absent key",
    );
    await assertStoreError(
      store.head(absent),
      "NotFound",
      "the refused replacement created nothing",
    );

    await assert.rejects(
      store.put(key, bytesOf("both"), { ifAbsent: true, ifMatch: v2 }),
      RangeError,
      "ifAbsent with ifMatch is a programming error",
    );

    // The same bytes put again: a new version where versions are per put; the same one where
    // they follow the bytes (S3), so there a writer still holding v2 is not fenced off by it,
    // which is why replacements must carry bytes of their own (a timestamp and a nonce).
    const same = await store.put(key, bytesOf("owner 2, nonce 9c01"), {
      ifMatch: v2,
      metadata: { owner: "2" },
    });
    const v3 = createdVersion(same);
    assert.equal((await store.head(key)).version, v3);
    if (versions === "per-put") {
      assert.notEqual(v3, v2, "the same bytes put again get a new version");
      await assertStoreError(
        store.put(key, bytesOf("owner 4, nonce 0b7e"), { ifMatch: v2 }),
        "PreconditionFailed",
        "the version before an identical put",
      );
    } else {
      assert.equal(v3, v2, "the same bytes put again keep the version");
      const stale = await store.put(key, bytesOf("owner 4, nonce 0b7e"), { ifMatch: v2 });
      assert.equal(stale.status, "Created", "the version before an identical put still matches");
    }
  },

  async "put-if-match-race"({ store, prefix }) {
    const key = `${prefix}owner`;
    await store.put(key, bytesOf("the owner before the race"));
    const { version } = await store.head(key);
    assert.ok(version, "HEAD reports a version");
    const bodies = Array.from({ length: 8 }, (_, i) => randomBytes(64 * 1024 + i));
    const results = await Promise.allSettled(
      bodies.map((body, i) =>
        store.put(key, body, { ifMatch: version, metadata: { writer: `${i}` } })
      ),
    );
    const winners = results.flatMap((r, i) =>
      r.status === "fulfilled" && r.value.status === "Created" ? [i] : []
    );
    assert.equal(winners.length, 1, `exactly one replacement wins, got ${winners.length}`);
    for (const [i, r] of results.entries()) {
      if (i === winners[0]) continue;
      assert.equal(r.status, "rejected", `writer ${i} lost`);
      const err = (r as PromiseRejectedResult).reason;
      assert.ok(
        err instanceof StoreError && err.kind === "PreconditionFailed",
        `writer ${i} lost with PreconditionFailed, not ${err}`,
      );
    }
    const [winner] = winners;
    assertBytes((await store.get(key)).bytes, bodies[winner], "the winner's body");
    const head = await store.head(key);
    assert.equal(head.metadata.writer, String(winner), "the winner's metadata");
    assert.equal(
      head.version,
      createdVersion((results[winner] as PromiseFulfilledResult<PutResult>).value),
    );
  },

  async "ranged-get"({ store, prefix }) {
    const key = `${prefix}object`;
    const body = randomBytes(1000);
    await store.put(key, body);
    const cases: Array<[string, number, number, number, number]> = [
      ["first byte", 0, 1, 0, 1],
      ["last byte", 999, 1, 999, 1000],
      ["middle", 100, 200, 100, 300],
      ["past the end (clamped)", 900, 500, 900, 1000],
      ["whole object", 0, 1000, 0, 1000],
    ];
    for (const [what, start, length, from, to] of cases) {
      const got = await store.get(key, { range: { start, length } });
      assert.equal(got.size, 1000, `${what}: size is the object's`);
      assertBytes(got.bytes, body.subarray(from, to), what);
    }
    await assertStoreError(store.get(key, { range: { start: 1000, length: 1 } }), "InvalidRange");
    await assertStoreError(store.get(key, { range: { start: 5000, length: 10 } }), "InvalidRange");
  },

  async "missing-key"({ store, prefix }) {
    await assertStoreError(store.get(`${prefix}missing`), "NotFound");
    await assertStoreError(store.head(`${prefix}missing`), "NotFound");
    await assertStoreError(
      store.get(`${prefix}missing`, { range: { start: 0, length: 1 } }),
      "NotFound",
    );
  },

  async "head-metadata"({ store, prefix }) {
    const key = `${prefix}00000000000000000042.log`;
    const metadata = {
      "end-offset": "1041",
      "start-timestamp": "1700000000000000",
      "xxh3-128": "0123456789abcdef0123456789abcdef",
      "format": "iggy-0.9",
      "tierd-version": "0.1.0",
    };
    await store.put(key, randomBytes(4321), {
      metadata,
      contentType: "application/octet-stream",
    });
    const head = await store.head(key);
    assert.equal(head.key, key);
    assert.equal(head.size, 4321);
    assert.deepEqual(head.metadata, metadata);
    const plain = `${prefix}plain`;
    await store.put(plain, bytesOf("x"));
    assert.deepEqual((await store.head(plain)).metadata, {});
  },

  async "delete-many"({ store, prefix }) {
    const keys = ["a", "b", "c"].map((k) => `${prefix}${k}`);
    for (const key of keys) await store.put(key, bytesOf(key));
    const doomed = [keys[0], keys[1], `${prefix}never-existed`];
    assert.deepEqual(await store.deleteMany(doomed), []);
    assert.deepEqual(await store.deleteMany(doomed), [], "deleting again succeeds too");
    assert.deepEqual(await store.deleteMany([]), []);
    await assertStoreError(store.head(keys[0]), "NotFound");
    await assertStoreError(store.get(keys[1]), "NotFound");
    assertBytes((await store.get(keys[2])).bytes, bytesOf(keys[2]), "the untouched key stays");
    assert.deepEqual((await listAll(store, prefix)).map((o) => o.key), [keys[2]]);
  },

  async "list-prefix"({ store, prefix }) {
    const names = ["a/b/1", "a/b/2", "a/bc/1", "a/bd", "ab", "z"];
    for (const name of names) await store.put(`${prefix}${name}`, bytesOf(name));
    const keysUnder = async (p: string) =>
      (await listAll(store, `${prefix}${p}`)).map((o) => o.key.slice(prefix.length));
    assert.deepEqual(await keysUnder("a/b/"), ["a/b/1", "a/b/2"], "a folder-like prefix");
    assert.deepEqual(await keysUnder("a/b"), ["a/b/1", "a/b/2", "a/bc/1", "a/bd"], "a/b vs a/bc");
    assert.deepEqual(await keysUnder("a"), ["a/b/1", "a/b/2", "a/bc/1", "a/bd", "ab"]);
    assert.deepEqual(await keysUnder(""), names);
    assert.deepEqual(await keysUnder("nothing/"), []);
    assert.deepEqual(await keysUnder("a/b/1"), ["a/b/1"], "a prefix that is a whole key");
    const page = await store.list(`${prefix}nothing/`);
    assert.deepEqual(page.objects, []);
    assert.equal(page.continuationToken, undefined);
    const info = (await store.list(`${prefix}a/bd`)).objects;
    assert.equal(info.length, 1);
    assert.equal(info[0].size, "a/bd".length);
  },

  async "list-paging"({ store, prefix }) {
    const keys = ["k1", "k2", "k3", "k4", "k5"].map((k) => `${prefix}${k}`);
    for (const key of [...keys].reverse()) await store.put(key, bytesOf(key));
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await store.list(prefix, { maxKeys: 2, continuationToken: token });
      assert.ok(page.objects.length <= 2, "a page holds at most maxKeys keys");
      seen.push(...page.objects.map((o) => o.key));
      token = page.continuationToken;
      assert.ok(++pages <= 5, "paging ends");
    } while (token);
    assert.deepEqual(seen, keys, "every key once, in order");
  },

  async "list-utf8-order"({ store, prefix }) {
    // UTF-8 byte order: "-" (2D) < "/" (2F) < "0" (30), ASCII < é (C3) < 日 (E6) < ～ U+FF5E
    // (EF) < 😀 (F0). UTF-16 order would put the emoji (a surrogate pair, D83D) before ～ (FF5E).
    const names = ["Z", "a", "a-b", "a~", "b-c", "b/c", "b0", "é", "日本", "～", "😀"];
    for (const name of [...names].reverse()) await store.put(`${prefix}${name}`, bytesOf(name));
    const listed = (await listAll(store, prefix, { pageSize: 3 })).map((o) =>
      o.key.slice(prefix.length)
    );
    assert.deepEqual(listed, names);
  },

  async "multipart-complete"({ store, prefix }) {
    const key = `${prefix}big.log`;
    const metadata = { "end-offset": "99", "xxh3-128": "00112233445566778899aabbccddeeff" };
    const uploadId = await store.createMultipart(key, {
      metadata,
      contentType: "application/octet-stream",
    });
    const bodies = [randomBytes(5 * MiB), randomBytes(5 * MiB + 17), randomBytes(1234)];
    const parts = await Promise.all(
      [3, 1, 2].map((n) => store.putPart(key, uploadId, n, bodies[n - 1])),
    );
    assert.deepEqual(parts.map((p) => p.partNumber), [3, 1, 2]);
    await assertStoreError(store.head(key), "NotFound", "invisible until completed");
    const inOrder = [...parts].sort((a, b) => a.partNumber - b.partNumber);
    const done = await store.completeMultipart(key, uploadId, inOrder);
    assert.equal(done.status, "Created");
    const got = await store.get(key);
    assert.equal(got.size, bodies.reduce((n, b) => n + b.length, 0));
    assertBytes(got.bytes, concatBytes(bodies), "the concatenation of the parts");
    const tail = await store.get(key, { range: { start: got.size - 10, length: 10 } });
    assertBytes(tail.bytes, bodies[2].subarray(-10));
    const head = await store.head(key);
    assert.deepEqual(head.metadata, metadata);
    const uploads = await store.listMultipartUploads(prefix);
    assert.ok(!uploads.some((u) => u.uploadId === uploadId), "a completed upload is gone");
  },

  async "multipart-abort"({ store, prefix }) {
    const key = `${prefix}aborted.log`;
    const uploadId = await store.createMultipart(key);
    await store.putPart(key, uploadId, 1, randomBytes(1000));
    assert.ok((await store.listMultipartUploads(prefix)).some((u) => u.uploadId === uploadId));
    await store.abortMultipart(key, uploadId);
    assert.ok(!(await store.listMultipartUploads(prefix)).some((u) => u.uploadId === uploadId));
    await assertStoreError(store.head(key), "NotFound");
    await store.abortMultipart(key, uploadId); // aborting twice is fine
  },

  async "multipart-list-uploads"({ store, prefix }) {
    const x1 = await store.createMultipart(`${prefix}x/1`);
    const x2 = await store.createMultipart(`${prefix}x/2`);
    const xy = await store.createMultipart(`${prefix}xy`);
    const y = await store.createMultipart(`${prefix}y/1`);
    try {
      const underX = await store.listMultipartUploads(`${prefix}x/`);
      assert.deepEqual(underX.map((u) => u.key).sort(), [`${prefix}x/1`, `${prefix}x/2`]);
      assert.deepEqual(underX.map((u) => u.uploadId).sort(), [x1, x2].sort());
      const all = await store.listMultipartUploads(prefix);
      assert.deepEqual(all.map((u) => u.uploadId).sort(), [x1, x2, xy, y].sort());
      assert.deepEqual(await store.listMultipartUploads(`${prefix}nothing`), []);
    } finally {
      for (const [k, id] of [["x/1", x1], ["x/2", x2], ["xy", xy], ["y/1", y]]) {
        await store.abortMultipart(`${prefix}${k}`, id);
      }
    }
    assert.deepEqual(await store.listMultipartUploads(prefix), []);
  },

  async "multipart-if-absent"({ store, prefix }) {
    const key = `${prefix}taken.log`;
    await store.put(key, bytesOf("already here"));
    const uploadId = await store.createMultipart(key);
    try {
      const part = await store.putPart(key, uploadId, 1, bytesOf("latecomer"));
      const result = await store.completeMultipart(key, uploadId, [part], { ifAbsent: true });
      assert.equal(result.status, "AlreadyExists");
      assertBytes((await store.get(key)).bytes, bytesOf("already here"));
    } finally {
      await store.abortMultipart(key, uploadId);
    }
  },

  async "head-checksums"({ store, prefix, checksum }) {
    if (!checksum) return;
    const expect = async (key: string, bytes: Uint8Array, what: string) => {
      const head = await store.head(key, { checksums: true });
      const want = { ...(await checksumOf(checksum, bytes)), type: "full" };
      assert.ok(
        head.checksums?.some((c) => JSON.stringify(c) === JSON.stringify(want)),
        `${what}: HEAD shows ${JSON.stringify(want)}, got ${JSON.stringify(head.checksums)}`,
      );
    };
    const small = randomBytes(1000);
    await store.put(`${prefix}single`, small, { ifAbsent: true, metadata: { a: "1" } });
    await expect(`${prefix}single`, small, "a single put");
    await store.put(`${prefix}empty`, new Uint8Array(0));
    await expect(`${prefix}empty`, new Uint8Array(0), "an empty object");
    // A multipart upload: the whole object's checksum, not one of its parts' (S3's `-N`).
    const key = `${prefix}multi.log`;
    const bodies = [randomBytes(5 * MiB), randomBytes(1234)];
    const uploadId = await store.createMultipart(key, { metadata: { b: "2" } });
    const parts = [];
    for (const [i, body] of bodies.entries()) {
      parts.push(await store.putPart(key, uploadId, i + 1, body));
    }
    const whole = concatBytes(bodies);
    const wanted = store.completionChecksum;
    await store.completeMultipart(key, uploadId, parts, {
      ifAbsent: true,
      checksum: wanted ? await checksumOf(wanted, whole) : undefined,
    });
    await expect(key, whole, "a multipart upload");
  },

  async "special-keys"({ store, prefix }) {
    const names = [
      "with space",
      "plus+sign",
      "equals=sign",
      "percent%20literal",
      "amp&ersand",
      "question?mark",
      "hash#mark",
      "tilde~",
      "bang!",
      "star*",
      "quote'",
      "(parens)",
      "caf\u00e9",
      "\u65e5\u672c",
      "emoji\u{1f600}",
      "folder with space/and+plus/file=1%&?#~!*'().log",
    ];
    const keys = names.map((n) => `${prefix}${n}`);
    for (const key of keys) {
      await store.put(key, bytesOf(key), {
        metadata: { "key-bytes": String(bytesOf(key).length) },
      });
    }
    for (const key of keys) {
      assertBytes((await store.get(key)).bytes, bytesOf(key), key);
      const head = await store.head(key);
      assert.equal(head.size, bytesOf(key).length, key);
      assert.equal(head.metadata["key-bytes"], String(bytesOf(key).length), key);
      const listed = await store.list(key);
      assert.deepEqual(listed.objects.map((o) => o.key), [key], `list(${key})`);
    }
    const all = (await listAll(store, prefix)).map((o) => o.key);
    assert.deepEqual(all, [...keys].sort(compareUtf8Bytes));
    assert.deepEqual(await store.deleteMany(keys), []);
    for (const key of keys) await assertStoreError(store.head(key), "NotFound", key);
    assert.deepEqual(await listAll(store, prefix), []);
  },
};

/** The cases that make ranged GETs: what a store sending them on fetch worker threads runs. */
export const RANGED_GET_CASES: readonly ContractCase[] = [
  "ranged-get",
  "missing-key",
  "multipart-complete",
];

/** Fetch worker threads that take every ranged GET (not only chunk-sized ones), for a variant. */
export function everyRangeOffThread(): FetchWorkers {
  return new FetchWorkers({
    firstByteMs: 10_000,
    stallMs: 10_000,
    inThread: (input, init) => fetch(input, init),
    workers: 1,
    minBytes: 1,
  });
}

/**
 * Closes `workers` and then the server (`stop`), failing when no GET went through a worker: the
 * variant would have tested the in-thread path again.
 */
export function offThreadClose(workers: FetchWorkers, stop: () => Promise<void>) {
  return async (): Promise<void> => {
    const answered = workers.offThread;
    workers.close();
    await stop();
    assert.ok(answered > 0, "no ranged GET went through a fetch worker thread");
  };
}

/**
 * Registers one `Deno.test` named `contract: ${name}` with a step per case, against one store.
 * @param name the backend, as the test name shows it
 * @param open makes the store (and whatever server it needs); `close` tears it down
 * @param options.exceptions cases this backend is known to fail, each with the reason
 * @param options.checksum the checksum HEAD must show on every object (`head-checksums`); a
 *   backend without one skips that case, loudly
 * @param options.versions what the backend's versions follow (`put-if-match`) @default "per-put"
 * @param options.only run these cases alone (a variant of a backend already run in full)
 * @example
 * contractSuite("fs", async () => {
 *   const dir = await tempDir();
 *   return { store: new FsStore({ root: dir.path }), close: dir.cleanup };
 * });
 */
export function contractSuite(
  name: string,
  open: () => Promise<{ store: ObjectStore; close(): Promise<void> }>,
  options: {
    exceptions?: Partial<Record<ContractCase, string>>;
    checksum?: ChecksumAlgorithm;
    versions?: VersionScheme;
    only?: readonly ContractCase[];
  } = {},
): void {
  Deno.test(`contract: ${name}`, async (t) => {
    const { store, close } = await open();
    const run = `contract-${Date.now().toString(36)}-${crypto.randomUUID().slice(0, 8)}`;
    try {
      for (
        const [label, body] of Object.entries(CASES) as Array<
          [ContractCase, typeof CASES[ContractCase]]
        >
      ) {
        if (options.only && !options.only.includes(label)) continue;
        const reason = options.exceptions?.[label] ??
          (label === "head-checksums" && !options.checksum
            ? "the backend keeps no checksum with its objects"
            : undefined);
        if (reason !== undefined) {
          console.warn(`\n!!! contract: ${name}: SKIPPING "${label}": ${reason}\n`);
          await t.step({ name: `${label} (skipped: ${reason})`, ignore: true, fn: () => {} });
          continue;
        }
        const prefix = `${run}/${label}/`;
        await t.step(label, async () => {
          try {
            await body({
              store,
              prefix,
              checksum: options.checksum,
              versions: options.versions ?? "per-put",
            });
          } catch (err) {
            await removeEverything(store, prefix).catch(() => {});
            throw err;
          }
          await removeEverything(store, prefix);
        });
      }
    } finally {
      await store.close?.();
      await close();
    }
  });
}

/** Deletes every object and aborts every upload under `prefix`. */
async function removeEverything(store: ObjectStore, prefix: string): Promise<void> {
  for (const upload of await store.listMultipartUploads(prefix)) {
    await store.abortMultipart(upload.key, upload.uploadId);
  }
  const keys = (await listAll(store, prefix)).map((o) => o.key);
  for (let i = 0; i < keys.length; i += 1000) {
    const failures = await store.deleteMany(keys.slice(i, i + 1000));
    assert.deepEqual(failures, [], "cleanup deletes everything it wrote");
  }
}

async function assertStoreError(
  promise: Promise<unknown>,
  kind: StoreErrorKind,
  message?: string,
): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof StoreError, `expected a StoreError, got ${err}`);
    assert.equal(err.kind, kind, `${message ?? ""}: ${err.message}`);
    return true;
  });
}

/** The version a put answered, failing unless it created the object. */
function createdVersion(result: PutResult): string | undefined {
  assert.equal(result.status, "Created");
  return result.status === "Created" ? result.version : undefined;
}

function assertBytes(actual: Uint8Array, expected: Uint8Array, what = "bytes"): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  // deepEqual on megabytes prints megabytes; find the first difference instead.
  const at = actual.findIndex((b, i) => b !== expected[i]);
  assert.equal(at, -1, `${what}: first difference at byte ${at}`);
}

function bytesOf(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

/** The suite's own oracle for UTF-8 byte order, independent of the providers' helper. */
function compareUtf8Bytes(a: string, b: string): number {
  const x = bytesOf(a);
  const y = bytesOf(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/**
 * Every object under `prefix`, following tokens, failing (rather than hanging) if a store hands
 * back a token that does not move forward or a key twice.
 */
async function listAll(
  store: ObjectStore,
  prefix: string,
  options: { pageSize?: number } = {},
): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  const tokens = new Set<string>();
  let token: string | undefined;
  do {
    const page = await store.list(prefix, { maxKeys: options.pageSize, continuationToken: token });
    out.push(...page.objects);
    token = page.continuationToken;
    assert.ok(token === undefined || !tokens.has(token), `list(${prefix}) repeats a token`);
    if (token !== undefined) tokens.add(token);
  } while (token);
  const keys = out.map((o) => o.key);
  assert.equal(new Set(keys).size, keys.length, `list(${prefix}) returns a key twice`);
  return out;
}
