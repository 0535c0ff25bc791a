// The pure Azure request builders: where requests go (Azurite's path style included), how blob
// names are encoded, metadata names Azure accepts, block ids, and the bodies.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import * as req from "../../../providers/azure/requests.ts";
import { StoreError } from "../../../providers/types.ts";

const cloud = req.resolveLocation({ account: "acct", container: "tier" });
const azurite = req.resolveLocation({
  account: "devstoreaccount1",
  container: "tier",
  endpoint: "http://127.0.0.1:10000",
});

Deno.test("azure requests: endpoints resolve to origin and account path", () => {
  assert.deepEqual(cloud, {
    origin: "https://acct.blob.core.windows.net",
    basePath: "",
    account: "acct",
    container: "tier",
  });
  // An IP endpoint without a path is Azurite's path style: the account is the first segment.
  assert.equal(azurite.basePath, "/devstoreaccount1");
  assert.equal(
    req.resolveLocation({ account: "a", container: "c", endpoint: "http://127.0.0.1:10000/a/" })
      .basePath,
    "/a",
  );
  // A custom domain keeps its path as given.
  assert.equal(
    req.resolveLocation({ account: "a", container: "c", endpoint: "https://blobs.example.com" })
      .basePath,
    "",
  );
  assert.throws(
    () => req.resolveLocation({ account: "a", container: "c", endpoint: "ftp://x" }),
    TypeError,
  );
});

Deno.test("azure requests: blob names are encoded per segment, slashes kept", () => {
  assert.equal(req.blobPath(cloud, "a b/c+d/e%20f"), "/tier/a%20b/c%2Bd/e%2520f");
  assert.equal(req.blobPath(azurite, "x?y#z"), "/devstoreaccount1/tier/x%3Fy%23z");
  assert.equal(req.blobPath(cloud, "caf\u00e9/\u{1f600}"), "/tier/caf%C3%A9/%F0%9F%98%80");
});

Deno.test("azure requests: Put Blob sets the blob type, a content type and If-None-Match", () => {
  const body = new Uint8Array([1, 2, 3]);
  const put = req.putBlob(cloud, "k", body, {
    ifAbsent: true,
    metadata: { "end-offset": "41", "xxh3-128": "ab" },
  });
  assert.equal(put.method, "PUT");
  assert.equal(put.body, body);
  assert.equal(put.headers["x-ms-blob-type"], "BlockBlob");
  assert.equal(put.headers["content-type"], "application/octet-stream");
  assert.equal(put.headers["if-none-match"], "*");
  assert.equal(put.headers["x-ms-meta-end_offset"], "41");
  assert.equal(put.headers["x-ms-meta-xxh3_128"], "ab");
  assert.equal(put.headers["x-ms-version"], req.AZURE_API_VERSION);
  assert.equal(
    req.putBlob(cloud, "k", body, { contentType: "text/plain" }).headers["content-type"],
    "text/plain",
  );
});

Deno.test("azure requests: a replacement sends If-Match with the ETag as Azure sent it", () => {
  const put = req.putBlob(cloud, "owner", new Uint8Array(1), { ifMatch: '"0x8DC5A1B2C3D4E5F"' });
  assert.equal(put.headers["if-match"], '"0x8DC5A1B2C3D4E5F"');
  assert.equal(put.headers["if-none-match"], undefined);
  assert.equal(req.putBlob(cloud, "owner", new Uint8Array(1)).headers["if-match"], undefined);
});

Deno.test("azure requests: metadata names become C# identifiers and come back unchanged", () => {
  fc.assert(fc.property(fc.stringMatching(/^[a-z-][a-z0-9-]{0,20}$/), (name) => {
    const encoded = req.encodeMetadataName(name, "put");
    assert.match(encoded, /^[A-Za-z_][A-Za-z0-9_]*$/);
    assert.equal(req.decodeMetadataName(encoded), name);
  }));
  assert.throws(
    () => req.encodeMetadataName("1st", "put", "k"),
    (err: unknown) =>
      err instanceof StoreError && err.kind === "Unsupported" &&
      err.detail.code === "InvalidArgument",
  );
});

Deno.test("azure requests: ranges go in x-ms-range", () => {
  assert.equal(
    req.getBlob(cloud, "k", { start: 10, length: 5 }).headers["x-ms-range"],
    "bytes=10-14",
  );
  assert.equal(req.getBlob(cloud, "k").headers["x-ms-range"], undefined);
});

Deno.test("azure requests: block ids are fixed-length base64 naming upload and part", () => {
  const upload = "0123456789abcdef0123456789abcdef";
  const ids = [1, 9, 10, 999, 10000].map((n) => req.blockId(upload, n));
  assert.equal(
    new Set(ids.map((id) => id.length)).size,
    1,
    "all block ids of a blob have one length",
  );
  assert.equal(Buffer.from(ids[3], "base64").toString(), `${upload}-00999`);
  assert.notEqual(req.blockId(upload, 1), req.blockId("f".repeat(32), 1));
  const block = req.putBlock(cloud, "k", ids[0], new Uint8Array(1));
  assert.deepEqual(block.query, [["comp", "block"], ["blockid", ids[0]]]);
});

Deno.test("azure requests: Put Block List commits <Latest> ids in order with the metadata", () => {
  const list = req.putBlockList(cloud, "k", ["QQ==", "Qg=="], {
    ifAbsent: true,
    metadata: { owner: "x" },
    contentType: "application/x-iggy",
  });
  assert.deepEqual(list.query, [["comp", "blocklist"]]);
  assert.equal(list.headers["x-ms-blob-content-type"], "application/x-iggy");
  assert.equal(list.headers["x-ms-meta-owner"], "x");
  assert.equal(list.headers["if-none-match"], "*");
  assert.equal(
    new TextDecoder().decode(list.body),
    '<?xml version="1.0" encoding="utf-8"?><BlockList><Latest>QQ==</Latest><Latest>Qg==</Latest></BlockList>',
  );
});

Deno.test("azure requests: List Blobs asks for a container listing, page size clamped", () => {
  const list = req.listBlobs(cloud, "a/b", { maxResults: 1e9, marker: "m" });
  assert.equal(list.path, "/tier");
  assert.deepEqual(list.query, [
    ["restype", "container"],
    ["comp", "list"],
    ["prefix", "a/b"],
    ["maxresults", "5000"],
    ["marker", "m"],
  ]);
  assert.deepEqual(req.listBlobs(cloud, "").query, [["restype", "container"], ["comp", "list"]]);
});

Deno.test("azure requests: Content-MD5 on Put Blob and Put Block, the blob's MD5 on Put Block List", () => {
  const md5 = { algorithm: "md5", value: "lXpb8WJjKFlucqk+jKAQrQ==" } as const;
  assert.equal(
    req.putBlob(cloud, "k", new Uint8Array(1), { md5 }).headers["content-md5"],
    md5.value,
  );
  assert.equal(req.putBlob(cloud, "k", new Uint8Array(1)).headers["content-md5"], undefined);
  assert.equal(
    req.putBlock(cloud, "k", "QQ==", new Uint8Array(1), md5).headers["content-md5"],
    md5.value,
  );
  const list = req.putBlockList(cloud, "k", ["QQ=="], { md5 });
  assert.equal(list.headers["x-ms-blob-content-md5"], md5.value);
  assert.equal(list.headers["content-md5"], undefined, "not of the block list's own XML");
  assert.throws(
    () => req.putBlob(cloud, "k", new Uint8Array(1), { md5: { algorithm: "crc32c", value: "" } }),
    RangeError,
  );
});
