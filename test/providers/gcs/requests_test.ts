// The pure GCS request builders: JSON API URLs with `/` as %2F, media and multipart/related
// uploads with `ifGenerationMatch=0`, ranged media downloads, listings and compose bodies.
import assert from "node:assert/strict";
import fc from "fast-check";
import * as req from "../../../providers/gcs/requests.ts";

const cloud = req.resolveLocation({ bucket: "tier" });
const fake = req.resolveLocation({ bucket: "tier", endpoint: "http://127.0.0.1:4443/" });
const text = (bytes?: Uint8Array) => new TextDecoder().decode(bytes);

Deno.test("gcs requests: object names are one path segment, '/' as %2F", () => {
  assert.equal(
    req.getObject(cloud, "iggy/a b/c+d%e?#.log").url,
    "https://storage.googleapis.com/storage/v1/b/tier/o/iggy%2Fa%20b%2Fc%2Bd%25e%3F%23.log",
  );
  assert.equal(
    req.deleteObject(fake, "a/b").url,
    "http://127.0.0.1:4443/storage/v1/b/tier/o/a%2Fb",
  );
  assert.equal(req.deleteObject(fake, "a/b").method, "DELETE");
  fc.assert(fc.property(fc.string({ minLength: 1 }), (name) => {
    const url = req.getObject(cloud, name).url;
    const segment = url.slice(url.indexOf("/o/") + 3);
    assert.ok(!segment.includes("/"));
    assert.equal(decodeURIComponent(segment), name);
  }));
});

Deno.test("gcs requests: without metadata a media upload, the name in the query", () => {
  const body = new Uint8Array([1, 2, 3]);
  const put = req.insertObject(cloud, "a/b", body, { ifAbsent: true });
  assert.equal(put.method, "POST");
  assert.equal(
    put.url,
    "https://storage.googleapis.com/upload/storage/v1/b/tier/o?uploadType=media&name=a%2Fb&ifGenerationMatch=0",
  );
  assert.equal(put.headers["content-type"], "application/octet-stream");
  assert.equal(put.body, body);
});

Deno.test("gcs requests: a replacement names the generation in ifGenerationMatch", () => {
  const put = req.insertObject(cloud, "owner", new Uint8Array(1), { ifMatch: "1709294400123456" });
  assert.equal(
    put.url,
    "https://storage.googleapis.com/upload/storage/v1/b/tier/o?uploadType=media&name=owner&ifGenerationMatch=1709294400123456",
  );
  // `ifGenerationMatch=0` would create the object where there is none: never from ifMatch.
  for (const bad of ["0", "", "-1", "12a", '"abc"', "007"]) {
    assert.throws(
      () => req.insertObject(cloud, "owner", new Uint8Array(1), { ifMatch: bad }),
      RangeError,
      bad,
    );
    assert.equal(req.isGeneration(bad), false, bad);
  }
  assert.equal(req.isGeneration("1"), true);
});

Deno.test("gcs requests: with metadata a multipart/related upload carrying name, type and metadata", () => {
  const media = new TextEncoder().encode("segment bytes");
  const put = req.insertObject(cloud, "a/b.log", media, {
    metadata: { "end-offset": "41" },
    contentType: "application/x-iggy",
    boundary: "BOUNDARY",
  });
  assert.equal(
    put.url,
    "https://storage.googleapis.com/upload/storage/v1/b/tier/o?uploadType=multipart",
  );
  assert.equal(put.headers["content-type"], "multipart/related; boundary=BOUNDARY");
  assert.equal(
    text(put.body),
    "--BOUNDARY\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n" +
      '{"name":"a/b.log","contentType":"application/x-iggy","metadata":{"end-offset":"41"}}\r\n' +
      "--BOUNDARY\r\ncontent-type: application/x-iggy\r\n\r\nsegment bytes\r\n--BOUNDARY--\r\n",
  );
});

Deno.test("gcs requests: a boundary that occurs in the bytes is replaced", () => {
  const media = new TextEncoder().encode("xx--BOUNDARY yy");
  const related = req.multipartRelated("{}", media, "application/octet-stream", "BOUNDARY");
  assert.notEqual(related.boundary, "BOUNDARY");
  assert.ok(!text(media).includes(related.boundary));
});

Deno.test("gcs requests: downloads are alt=media with a Range header", () => {
  const get = req.getMedia(cloud, "k", { start: 100, length: 200 });
  assert.equal(get.url, "https://storage.googleapis.com/storage/v1/b/tier/o/k?alt=media");
  assert.equal(get.headers["range"], "bytes=100-299");
  assert.deepEqual(req.getMedia(cloud, "k").headers, {});
});

Deno.test("gcs requests: listings carry prefix, page size (clamped) and page token", () => {
  assert.equal(
    req.listObjects(cloud, "iggy/a b", { maxResults: 5000, pageToken: "tok+/=" }).url,
    "https://storage.googleapis.com/storage/v1/b/tier/o?prefix=iggy%2Fa%20b&maxResults=1000&pageToken=tok%2B%2F%3D",
  );
  assert.equal(
    req.listObjects(cloud, "").url,
    "https://storage.googleapis.com/storage/v1/b/tier/o",
  );
});

Deno.test("gcs requests: compose names sources with generations and the destination's metadata", () => {
  const compose = req.composeObject(cloud, "a/b", [{ name: "p/1", generation: "17" }, {
    name: "p/2",
  }], {
    ifAbsent: true,
    metadata: { owner: "x" },
  });
  assert.equal(
    compose.url,
    "https://storage.googleapis.com/storage/v1/b/tier/o/a%2Fb/compose?ifGenerationMatch=0",
  );
  assert.deepEqual(JSON.parse(text(compose.body)), {
    kind: "storage#composeRequest",
    sourceObjects: [{ name: "p/1", generation: "17" }, { name: "p/2" }],
    destination: { contentType: "application/octet-stream", metadata: { owner: "x" } },
  });
  assert.throws(() => req.composeObject(cloud, "a", []), RangeError);
  assert.throws(
    () => req.composeObject(cloud, "a", Array.from({ length: 33 }, (_, i) => ({ name: `${i}` }))),
    RangeError,
  );
});

Deno.test("gcs requests: a checksum makes it a multipart/related upload with crc32c in the resource", () => {
  const put = req.insertObject(cloud, "p/part-00001", new Uint8Array([7]), {
    checksum: { algorithm: "crc32c", value: "ifj56A==" },
    boundary: "B",
  });
  assert.equal(
    put.url,
    "https://storage.googleapis.com/upload/storage/v1/b/tier/o?uploadType=multipart",
  );
  assert.match(
    text(put.body),
    /\{"name":"p\/part-00001","contentType":"application\/octet-stream","crc32c":"ifj56A=="\}/,
  );
  const md5 = req.insertObject(cloud, "k", new Uint8Array(0), {
    checksum: { algorithm: "md5", value: "1B2M2Y8AsgTpgAmY7PhCfg==" },
  });
  assert.match(text(md5.body), /"md5Hash":"1B2M2Y8AsgTpgAmY7PhCfg=="/);
  assert.throws(
    () =>
      req.insertObject(cloud, "k", new Uint8Array(0), {
        checksum: { algorithm: "crc64nvme", value: "" },
      }),
    RangeError,
  );
});
