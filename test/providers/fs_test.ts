// What only the filesystem store has to get right: paths that stay inside the root, crash
// leftovers, several stores on one root, its on-disk layout (plain files standard tools read,
// copy and compare), and reading the first layout. Separate processes: fs_processes_test.ts.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore, META_SUFFIX } from "../../providers/fs/store.ts";
import { encodeLegacyObject, LAYOUT_FILE } from "../../providers/fs/legacy.ts";
import { StoreError } from "../../providers/types.ts";
import { tempDir } from "../_util.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

const refused = (code: string) => (err: unknown) =>
  err instanceof StoreError && err.kind === "Unsupported" && err.detail.code === code;

/** Every path below `dir`, relative to it. */
async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  return entries.map(String).sort();
}

Deno.test("fs: hostile keys are refused and nothing is written outside the root", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const root = join(dir.path, "bucket", "root");
    await mkdir(join(dir.path, "bucket", "sibling"), { recursive: true });
    const store = new FsStore({ root });
    await store.put("inside", bytes("ok"));
    const before = await tree(dir.path);
    const hostile = [
      "../x",
      "../../x",
      "a/../../x",
      "a/../x",
      "..",
      ".",
      "./x",
      "a/./x",
      "a//b",
      "/abs",
      "/",
      "a/",
      "nul\0byte",
      "a/\0/b",
      "",
      "x".repeat(256),
      "x".repeat(240),
      `a${META_SUFFIX}`,
      `a${META_SUFFIX}/b`,
    ];
    for (const key of hostile) {
      const code = "InvalidKey";
      await assert.rejects(
        store.put(key, bytes("evil")),
        refused(code),
        `put ${JSON.stringify(key)}`,
      );
      await assert.rejects(store.put(key, bytes("evil"), { ifAbsent: true }), refused(code));
      await assert.rejects(store.get(key), refused(code), `get ${JSON.stringify(key)}`);
      await assert.rejects(store.head(key), refused(code));
      await assert.rejects(store.createMultipart(key), refused(code));
      const failures = await store.deleteMany([key]);
      assert.equal(failures.length, 1, `deleteMany ${JSON.stringify(key)} reports the refusal`);
      assert.equal(failures[0].error.detail.code, code);
    }
    for (const prefix of ["../", "../../", "a/../../", "/", "//", "a//", "\0"]) {
      assert.deepEqual((await store.list(prefix)).objects, [], `list ${JSON.stringify(prefix)}`);
    }
    assert.deepEqual(await tree(dir.path), before, "no file appeared anywhere");
    assert.deepEqual((await listBounded(store, "")).map((o) => o.key), ["inside"]);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: a key needing a folder where an object is (or the reverse) is a typed refusal", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    await store.put("a/b", bytes("object"));
    await assert.rejects(store.put("a/b/c", bytes("x")), refused("KeyConflict"));
    await store.put("d/e/f", bytes("object"));
    await assert.rejects(store.put("d/e", bytes("x")), refused("KeyConflict"));
    await assert.rejects(store.put("d/e", bytes("x"), { ifAbsent: true }), refused("KeyConflict"));
    await assert.rejects(
      store.head("d/e"),
      (err: unknown) => (err as StoreError).kind === "NotFound",
    );
    await assert.rejects(
      store.get("a/b/c"),
      (err: unknown) => (err as StoreError).kind === "NotFound",
    );
    assert.deepEqual(
      await store.deleteMany(["d/e", "a/b/c"]),
      [],
      "deleting a folder's name is a no-op",
    );
    assert.deepEqual((await listBounded(store, "")).map((o) => o.key), ["a/b", "d/e/f"]);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: leftovers of a crashed write are never objects, and old ones are swept", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    await store.put("seg/0.log", bytes("complete"));
    // A crash between writing the temp file and publishing it leaves it in tmp/.
    const fresh = join(dir.path, "tmp", "0123456789abcdef01234567");
    const stale = join(dir.path, "tmp", "76543210fedcba9876543210");
    await writeFile(fresh, bytes("half a segm"));
    await writeFile(stale, bytes("half a segm"));
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    await utimes(stale, old, old);
    // A stray file among the objects, without metadata beside it, is no object either.
    await writeFile(join(dir.path, "objects", "seg", "stray"), bytes("junk"));
    assert.deepEqual((await listBounded(store, "")).map((o) => o.key), ["seg/0.log"]);

    const reopened = new FsStore({ root: dir.path });
    assert.deepEqual((await listBounded(reopened, "")).map((o) => o.key), ["seg/0.log"]);
    assert.deepEqual(
      await readdir(join(dir.path, "tmp")),
      ["0123456789abcdef01234567"],
      "only the stale one goes",
    );
    await assert.rejects(
      reopened.get("seg/stray"),
      (err: unknown) => (err as StoreError).kind === "NotFound",
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: create-only puts from two stores on one root have exactly one winner", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const stores = [new FsStore({ root: dir.path }), new FsStore({ root: dir.path })];
    for (let round = 0; round < 5; round++) {
      const key = `p/0/${round}/00000000000000000000.log`;
      const bodies = Array.from({ length: 16 }, (_, i) => bytes(`writer ${i} `.repeat(1000 + i)));
      const results = await Promise.all(
        bodies.map((body, i) =>
          stores[i % 2].put(key, body, { ifAbsent: true, metadata: { writer: String(i) } })
        ),
      );
      const winners = results.flatMap((r, i) => (r.status === "Created" ? [i] : []));
      assert.equal(winners.length, 1);
      for (const store of stores) {
        assert.deepEqual((await store.get(key)).bytes, bodies[winners[0]]);
        assert.equal((await store.head(key)).metadata.writer, String(winners[0]));
      }
    }
    assert.deepEqual(await readdir(join(dir.path, "tmp")), [], "losers leave no temp files");
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: concurrent overwrites never mix one writer's bytes with another's metadata", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const stores = [new FsStore({ root: dir.path }), new FsStore({ root: dir.path })];
    const writes = Array.from(
      { length: 12 },
      (_, i) => stores[i % 2].put("k", bytes(`body-${i}`), { metadata: { writer: String(i) } }),
    );
    await Promise.all(writes);
    const got = new TextDecoder().decode((await stores[0].get("k")).bytes);
    assert.equal(got, `body-${(await stores[1].head("k")).metadata.writer}`);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: replacements from two stores on one root: one winner per version, no leftovers", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const stores = [new FsStore({ root: dir.path }), new FsStore({ root: dir.path })];
    await stores[0].put("owner", bytes("nobody"));
    for (let round = 0; round < 5; round++) {
      const { version } = await stores[round % 2].head("owner");
      const results = await Promise.allSettled(
        Array.from(
          { length: 8 },
          (_, i) =>
            stores[i % 2].put("owner", bytes(`writer ${i} round ${round}`), {
              ifMatch: version,
              metadata: { writer: String(i) },
            }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
      assert.equal(winners.length, 1, `round ${round}`);
      for (const r of results) {
        if (r.status === "rejected") {
          assert.ok(r.reason instanceof StoreError && r.reason.kind === "PreconditionFailed");
          assert.equal(r.reason.detail.code, "VersionMismatch");
        }
      }
      const got = new TextDecoder().decode((await stores[1].get("owner")).bytes);
      assert.equal(got, `writer ${(await stores[0].head("owner")).metadata.writer} round ${round}`);
    }
    await assert.rejects(
      stores[0].put("owner", bytes("x"), { ifAbsent: true, ifMatch: "v" }),
      RangeError,
    );
    assert.deepEqual(await readdir(join(dir.path, "tmp")), [], "losers leave no temp files");
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: versions live in the metadata file: copied with it, derived where it has none", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const root = join(dir.path, "a");
    const store = new FsStore({ root });
    const put = await store.put("owner", bytes("same bytes"));
    const again = await store.put("owner", bytes("same bytes"));
    assert.ok(put.status === "Created" && again.status === "Created");
    assert.notEqual(again.version, put.version, "the same bytes put again: a new version");
    assert.match(again.version ?? "", /^[0-9a-f]{32}$/);
    // cp -r: new inodes, the same metadata files. The copy's object keeps its version.
    const copy = join(dir.path, "b");
    assert.equal((await run("cp", "-r", root, copy)).code, 0);
    const copied = new FsStore({ root: copy });
    assert.equal((await copied.head("owner")).version, again.version);
    const moved = await copied.put("owner", bytes("replaced in the copy"), {
      ifMatch: again.version,
    });
    assert.equal(moved.status, "Created");
    // Metadata an earlier tierd wrote has no version: one is derived from the ETag and the data
    // file, it holds for a replacement, and the replacement writes a random one.
    const metaPath = join(root, "objects", "owner" + META_SUFFIX);
    const { version: _, ...older } = JSON.parse(await readFile(metaPath, "utf8"));
    await writeFile(metaPath, JSON.stringify(older));
    const derived = (await store.head("owner")).version;
    assert.equal(derived, `${older.etag}.${older.ino}.${older.mtimeNs}`);
    assert.equal((await store.get("owner")).version, derived);
    const next = await store.put("owner", bytes("replaced"), { ifMatch: derived });
    assert.ok(next.status === "Created" && /^[0-9a-f]{32}$/.test(next.version ?? ""));
    await assert.rejects(
      store.put("owner", bytes("stale"), { ifMatch: derived }),
      (err: unknown) => err instanceof StoreError && err.kind === "PreconditionFailed",
    );
  } finally {
    await dir.cleanup();
  }
});

/** Runs a command; its exit code and stdout. */
async function run(cmd: string, ...args: string[]): Promise<{ code: number; out: string }> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return { code: out.code, out: new TextDecoder().decode(out.stdout) };
}

Deno.test("fs: objects are plain files, byte for byte what was put, metadata beside; emptied folders go", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    const key = "tierd/c1/1/1/0/00ab-0/00000000000000000000.log";
    const source = join(dir.path, "source.log");
    const body = crypto.getRandomValues(new Uint8Array(40_000));
    await writeFile(source, body);
    await store.put(key, body, { metadata: { "end-offset": "4" }, contentType: "text/plain" });
    const path = join(dir.path, "objects", ...key.split("/"));
    // Standard tools: cmp says the object file is the source, byte for byte.
    assert.deepEqual(await run("cmp", source, path), { code: 0, out: "" });
    const meta = JSON.parse(await readFile(path + META_SUFFIX, "utf8"));
    assert.equal(meta.size, 40_000);
    assert.equal(meta.contentType, "text/plain");
    assert.deepEqual(meta.metadata, { "end-offset": "4" });
    assert.equal(meta.ino, String((await stat(path, { bigint: true })).ino));
    assert.deepEqual(
      (await store.get(key, { range: { start: 1, length: 3 } })).bytes,
      body.subarray(1, 4),
    );
    assert.deepEqual(JSON.parse(await readFile(join(dir.path, LAYOUT_FILE), "utf8")).version, 2);

    await store.put("tierd/c1/keep", bytes("x"));
    assert.deepEqual(await store.deleteMany([key]), []);
    assert.deepEqual(await readdir(join(dir.path, "objects", "tierd")), ["c1"]);
    assert.deepEqual(
      (await readdir(join(dir.path, "objects", "tierd", "c1"))).sort(),
      ["keep", `keep${META_SUFFIX}`],
    );
    // A put into a folder a delete just pruned recreates it.
    await store.put(key, bytes("again"));
    assert.deepEqual((await store.get(key)).bytes, bytes("again"));
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: a copied directory serves its objects; a file changed in place is no object", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const root = join(dir.path, "a");
    const store = new FsStore({ root, minPartSize: 4 });
    await store.put("one", bytes("single put"), { metadata: { n: "1" } });
    const id = await store.createMultipart("two", { metadata: { n: "2" } });
    const parts = [
      await store.putPart("two", id, 1, bytes("abcd")),
      await store.putPart("two", id, 2, bytes("ef")),
    ];
    await store.completeMultipart("two", id, parts);
    await store.put("three", bytes("to be flipped"));
    // cp -r: new inodes and mtimes, the same bytes. Each object is recognised by its ETag.
    const copy = join(dir.path, "b");
    assert.equal((await run("cp", "-r", root, copy)).code, 0);
    const copied = new FsStore({ root: copy });
    // A create on a copied key is refused: the copy's object is recognised under the lock.
    assert.equal(
      (await copied.put("two", bytes("intruder"), { ifAbsent: true })).status,
      "AlreadyExists",
    );
    assert.deepEqual((await copied.get("one")).bytes, bytes("single put"));
    assert.deepEqual((await copied.head("two")).metadata, { n: "2" });
    assert.deepEqual((await copied.get("two")).bytes, bytes("abcdef"));
    // …and adopted: the metadata now names the copy's files.
    const ino = String((await stat(join(copy, "objects", "one"), { bigint: true })).ino);
    assert.equal(
      JSON.parse(await readFile(join(copy, "objects", "one" + META_SUFFIX), "utf8")).ino,
      ino,
    );
    // One byte flipped in place (another mtime, the same size): its metadata no longer holds.
    const flipped = join(copy, "objects", "three");
    const raw = await readFile(flipped);
    raw[0] ^= 1;
    await writeFile(flipped, raw);
    await assert.rejects(
      copied.get("three"),
      (err: unknown) => (err as StoreError).kind === "NotFound",
    );
    assert.deepEqual(
      (await store.get("three")).bytes,
      bytes("to be flipped"),
      "the original is fine",
    );
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: objects of the first layout (a 4 KiB header) are migrated when the store opens", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const objects = join(dir.path, "objects");
    await mkdir(join(objects, "p", "0"), { recursive: true });
    const single = bytes("segment bytes");
    const multi = crypto.getRandomValues(new Uint8Array(10_000));
    const singleEtag = "c2e6a5c3a0fd4f1a5e7ab1e4e8a3f0d1";
    await writeFile(
      join(objects, "p", "0", "00.log"),
      encodeLegacyObject(
        { etag: singleEtag, contentType: "text/plain", metadata: { a: "1" } },
        single,
      ),
    );
    await writeFile(
      join(objects, "p", "0", "01.log"),
      encodeLegacyObject({ etag: "0123456789abcdef0123456789abcdef-3", metadata: {} }, multi),
    );
    const then = new Date(Date.now() - 86_400_000);
    await utimes(join(objects, "p", "0", "01.log"), then, then);

    const store = new FsStore({ root: dir.path });
    assert.deepEqual(
      (await store.list("p/")).objects.map((o) => [o.key, o.size]),
      [["p/0/00.log", single.length], ["p/0/01.log", multi.length]],
    );
    const head = await store.head("p/0/00.log");
    assert.deepEqual(head.metadata, { a: "1" });
    assert.equal(head.etag, singleEtag);
    assert.deepEqual((await store.get("p/0/00.log")).bytes, single);
    assert.deepEqual((await store.get("p/0/01.log")).bytes, multi);
    const multiHead = await store.head("p/0/01.log");
    assert.equal(multiHead.etag, "0123456789abcdef0123456789abcdef-3");
    assert.equal(multiHead.lastModified?.getTime(), then.getTime(), "the object keeps its age");
    // The files are plain now, and the layout file says nothing is left to migrate.
    assert.deepEqual(new Uint8Array(await readFile(join(objects, "p", "0", "01.log"))), multi);
    assert.ok((await stat(join(dir.path, LAYOUT_FILE))).isFile());
    // A copy of the migrated store still knows the multipart object by its bytes.
    const copy = join(dir.path, "..", `${dir.path.split("/").pop()}-copy`);
    try {
      assert.equal((await run("cp", "-r", dir.path, copy)).code, 0);
      assert.deepEqual((await new FsStore({ root: copy }).get("p/0/01.log")).bytes, multi);
    } finally {
      await run("rm", "-rf", copy);
    }
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: multipart follows S3's rules and survives a second store on the root", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path, minPartSize: 4 });
    const other = new FsStore({ root: dir.path, minPartSize: 4 });
    const id = await store.createMultipart("big", { metadata: { "end-offset": "6" } });
    assert.match(id, /^[0-9a-f]{32}$/);
    const p1 = await store.putPart("big", id, 1, bytes("abcd"));
    const p2 = await other.putPart("big", id, 2, bytes("ef"));
    const p3 = await store.putPart("big", id, 3, bytes("g"));
    const code = (c: string) => (err: unknown) => (err as StoreError).detail.code === c;
    await assert.rejects(store.completeMultipart("big", id, [p1, p2, p3]), code("EntityTooSmall"));
    await assert.rejects(
      store.completeMultipart("big", id, [p1, { ...p2, etag: "0".repeat(32) }]),
      code("InvalidPart"),
    );
    await assert.rejects(
      store.completeMultipart("big", id, [p1, { partNumber: 7, etag: p2.etag }]),
      code("InvalidPart"),
    );
    await assert.rejects(store.completeMultipart("big", id, [p1, p1]), code("InvalidPartOrder"));
    await assert.rejects(store.completeMultipart("other", id, [p1]), code("NoSuchUpload"));
    await assert.rejects(store.completeMultipart("big", "../../etc", [p1]), code("NoSuchUpload"));
    await assert.rejects(store.putPart("big", "nope", 1, bytes("x")), code("NoSuchUpload"));
    await assert.rejects(store.putPart("big", id, 0, bytes("x")), code("InvalidArgument"));
    // Re-uploading a part replaces it.
    const p2b = await store.putPart("big", id, 2, bytes("EF"));
    await assert.rejects(store.completeMultipart("big", id, [p1, p2]), code("InvalidPart"));
    const done = await other.completeMultipart("big", id, [p1, { ...p2b, etag: `"${p2b.etag}"` }]);
    assert.equal(done.status, "Created");
    assert.match((done as { etag: string }).etag, /^[0-9a-f]{32}-2$/);
    assert.deepEqual((await store.get("big")).bytes, bytes("abcdEF"));
    assert.deepEqual(
      new Uint8Array(await readFile(join(dir.path, "objects", "big"))),
      bytes("abcdEF"),
    );
    assert.deepEqual((await store.head("big")).metadata, { "end-offset": "6" });
    assert.equal((await store.head("big")).etag, (done as { etag: string }).etag);
    assert.deepEqual(await store.listMultipartUploads(""), []);
    assert.deepEqual(await readdir(join(dir.path, "uploads")), []);
    await store.abortMultipart("big", id); // finished: fine
    await store.abortMultipart("big", "../../../etc"); // nonsense: fine, touches nothing
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: requests honour an aborted signal", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    const signal = AbortSignal.abort();
    await assert.rejects(store.put("k", bytes("x"), { signal }), { name: "AbortError" });
    await assert.rejects(store.get("k", { signal }), { name: "AbortError" });
    await assert.rejects(store.list("", { signal }), { name: "AbortError" });
    assert.deepEqual(await listBounded(store, ""), []);
  } finally {
    await dir.cleanup();
  }
});

Deno.test("fs: an object written under Bun is read under Deno as is: mtimes compare to the millisecond", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    const body = crypto.getRandomValues(new Uint8Array(60_000));
    await store.put("seg.log", body);
    const metaPath = join(dir.path, "objects", "seg.log") + META_SUFFIX;
    // Bun's node:fs states mtimes to the nanosecond, Deno's in whole milliseconds: the metadata
    // as the binary wrote it carries digits this runtime never sees.
    const meta = JSON.parse(await readFile(metaPath, "utf8"));
    const ms = BigInt(meta.mtimeNs) / 1_000_000n;
    meta.mtimeNs = String(ms * 1_000_000n + 654_321n);
    const written = JSON.stringify(meta);
    await writeFile(metaPath, written);
    assert.deepEqual((await store.get("seg.log")).bytes, body);
    assert.equal((await store.head("seg.log")).size, body.length);
    // Recognised as the same file: not re-hashed whole and rebound (which rewrites the metadata).
    assert.equal(await readFile(metaPath, "utf8"), written);
    // A file changed in place a millisecond later, same size, is no longer that object.
    const path = join(dir.path, "objects", "seg.log");
    await writeFile(path, crypto.getRandomValues(new Uint8Array(60_000)));
    const later = new Date(Number(ms) + 5);
    await utimes(path, later, later);
    await assert.rejects(store.get("seg.log"), (e) => e instanceof StoreError);
  } finally {
    await dir.cleanup();
  }
});
