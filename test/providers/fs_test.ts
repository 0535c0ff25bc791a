// What only the filesystem store has to get right: paths that stay inside the root, crash
// leftovers, several stores (or processes) on one root, and its on-disk layout.
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore, HEADER_SIZE } from "../../providers/fs/store.ts";
import { listAll, StoreError } from "../../providers/types.ts";
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
    assert.deepEqual((await listAll(store, "")).map((o) => o.key), ["inside"]);
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
    assert.deepEqual((await listAll(store, "")).map((o) => o.key), ["a/b", "d/e/f"]);
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
    // A stray non-object file among the objects (shorter than a header) is not listed either.
    await writeFile(join(dir.path, "objects", "seg", "stray"), bytes("junk"));
    assert.deepEqual((await listAll(store, "")).map((o) => o.key), ["seg/0.log"]);

    const reopened = new FsStore({ root: dir.path });
    assert.deepEqual((await listAll(reopened, "")).map((o) => o.key), ["seg/0.log"]);
    assert.deepEqual(
      await readdir(join(dir.path, "tmp")),
      ["0123456789abcdef01234567"],
      "only the stale one goes",
    );
    await assert.rejects(
      reopened.get("seg/stray"),
      (err: unknown) => (err as StoreError).kind === "Malformed",
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

Deno.test("fs: objects are files under objects/ with a 4 KiB header; emptied folders go", async () => {
  const dir = await tempDir("tierd-fs");
  try {
    const store = new FsStore({ root: dir.path });
    const key = "tierd/c1/1/1/0/00ab-0/00000000000000000000.log";
    await store.put(key, bytes("hello"), {
      metadata: { "end-offset": "4" },
      contentType: "text/plain",
    });
    const path = join(dir.path, "objects", ...key.split("/"));
    assert.equal((await stat(path)).size, HEADER_SIZE + 5);
    const raw = await readFile(path);
    assert.equal(new TextDecoder().decode(raw.subarray(HEADER_SIZE)), "hello");
    assert.match(new TextDecoder().decode(raw.subarray(0, 200)), /"end-offset":"4"/);
    assert.deepEqual(
      (await store.get(key, { range: { start: 1, length: 3 } })).bytes,
      bytes("ell"),
    );

    await store.put("tierd/c1/keep", bytes("x"));
    assert.deepEqual(await store.deleteMany([key]), []);
    assert.deepEqual(await readdir(join(dir.path, "objects", "tierd")), ["c1"]);
    assert.deepEqual(await readdir(join(dir.path, "objects", "tierd", "c1")), ["keep"]);
    // A put into a folder a delete just pruned recreates it.
    await store.put(key, bytes("again"));
    assert.deepEqual((await store.get(key)).bytes, bytes("again"));
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
    assert.deepEqual(await listAll(store, ""), []);
  } finally {
    await dir.cleanup();
  }
});
