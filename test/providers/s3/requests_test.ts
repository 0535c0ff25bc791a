// The pure S3 request builders: addressing styles, keys, queries, headers and XML bodies.
import assert from "node:assert/strict";
import {
  checkKey,
  completeMultipartBody,
  completeMultipartUpload,
  createBucket,
  createMultipartUpload,
  deleteObjectsBody,
  getObject,
  headObject,
  listMultipartUploads,
  listObjectsV2,
  putObject,
  resolveLocation,
  uploadPart,
} from "../../../providers/s3/requests.ts";
import { StoreError } from "../../../providers/types.ts";

const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes);

Deno.test("requests: auto style is virtual on AWS, path elsewhere", () => {
  const aws = resolveLocation({ region: "eu-west-1", bucket: "tier", urlStyle: "auto" });
  assert.deepEqual(aws, {
    protocol: "https:",
    endpointHost: "s3.eu-west-1.amazonaws.com",
    basePath: "",
    bucket: "tier",
    style: "virtual",
  });
  const dotted = resolveLocation({ region: "eu-west-1", bucket: "my.tier", urlStyle: "auto" });
  assert.equal(dotted.style, "path", "a dotted bucket breaks the TLS wildcard");
  const minio = resolveLocation({
    endpoint: "http://127.0.0.1:9000/",
    region: "us-east-1",
    bucket: "tier",
    urlStyle: "auto",
  });
  assert.equal(minio.style, "path");
  assert.equal(minio.endpointHost, "127.0.0.1:9000");
  const defaultPort = resolveLocation({
    endpoint: "https://s3.example.com:443/base/",
    region: "r",
    bucket: "b",
    urlStyle: "virtual",
  });
  assert.equal(defaultPort.endpointHost, "s3.example.com", "the default port is not signed");
  assert.equal(defaultPort.basePath, "/base");
  assert.throws(
    () => resolveLocation({ endpoint: "ftp://x", region: "r", bucket: "b", urlStyle: "auto" }),
    TypeError,
  );
});

Deno.test("requests: path and virtual-host addressing", () => {
  const path = resolveLocation({
    endpoint: "http://127.0.0.1:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  const virtual = { ...path, style: "virtual" as const };
  assert.deepEqual(
    [getObject(path, "k/a b").host, getObject(path, "k/a b").path],
    ["127.0.0.1:9000", "/b/k/a b"],
  );
  assert.deepEqual(
    [getObject(virtual, "k/a b").host, getObject(virtual, "k/a b").path],
    ["b.127.0.0.1:9000", "/k/a b"],
  );
  assert.equal(listObjectsV2(path, "p").path, "/b");
  assert.equal(listObjectsV2(virtual, "p").path, "/");
});

Deno.test("requests: keys S3 cannot address are refused before sending", () => {
  for (const key of ["", "a/../b", "./a", "a/.", "..", "a\ud800"]) {
    assert.throws(() => checkKey(key, "put"), (err: unknown) => {
      assert.ok(err instanceof StoreError);
      assert.equal(err.kind, "Unsupported");
      assert.equal(err.detail.code, "InvalidKey");
      return true;
    }, JSON.stringify(key));
  }
  for (const key of ["a..b", ".hidden", "a/...", "a//b", "/lead"]) checkKey(key, "put");
});

Deno.test("requests: put carries metadata, content type and If-None-Match", () => {
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  const put = putObject(loc, "k", new Uint8Array(3), {
    ifAbsent: true,
    metadata: { "end-offset": "41", "xxh3-128": "00ff" },
    contentType: "application/octet-stream",
  });
  assert.equal(put.method, "PUT");
  assert.deepEqual(put.headers, {
    "x-amz-meta-end-offset": "41",
    "x-amz-meta-xxh3-128": "00ff",
    "content-type": "application/octet-stream",
    "if-none-match": "*",
  });
  assert.equal(getObject(loc, "k", { start: 10, length: 5 }).headers.range, "bytes=10-14");
  const part = uploadPart(loc, "k", "up/1=", 7, new Uint8Array(1));
  assert.deepEqual(part.query, [["partNumber", "7"], ["uploadId", "up/1="]]);
});

Deno.test("requests: a replacement sends If-Match with the version quoted", () => {
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  const put = putObject(loc, "owner", new Uint8Array(3), {
    ifMatch: "9b2cf535f27731c974343645a3985328",
  });
  assert.deepEqual(put.headers, { "if-match": '"9b2cf535f27731c974343645a3985328"' });
  const quoted = putObject(loc, "owner", new Uint8Array(3), { ifMatch: '"abc-2"' });
  assert.equal(quoted.headers["if-match"], '"abc-2"', "a version given quoted is not quoted twice");
  assert.equal(putObject(loc, "owner", new Uint8Array(3)).headers["if-match"], undefined);
});

Deno.test("requests: ListObjectsV2 and ListMultipartUploads queries", () => {
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  assert.deepEqual(
    listObjectsV2(loc, "iggy/", { maxKeys: 5000, continuationToken: "tok+/=" }).query,
    [
      ["list-type", "2"],
      ["encoding-type", "url"],
      ["prefix", "iggy/"],
      ["max-keys", "1000"],
      ["continuation-token", "tok+/="],
    ],
  );
  assert.deepEqual(listObjectsV2(loc, "").query, [["list-type", "2"], ["encoding-type", "url"]]);
  assert.deepEqual(listMultipartUploads(loc, "p/", { keyMarker: "k", uploadIdMarker: "u" }).query, [
    ["uploads", ""],
    ["encoding-type", "url"],
    ["prefix", "p/"],
    ["key-marker", "k"],
    ["upload-id-marker", "u"],
  ]);
});

Deno.test("requests: DeleteObjects body escapes keys and asks for quiet mode", () => {
  const body = text(deleteObjectsBody(["a&b", "<c>", "q\"'", "cr\r"]));
  assert.equal(
    body,
    '<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      "<Quiet>true</Quiet><Object><Key>a&amp;b</Key></Object><Object><Key>&lt;c&gt;</Key></Object>" +
      "<Object><Key>q&quot;&apos;</Key></Object><Object><Key>cr&#13;</Key></Object></Delete>",
  );
});

Deno.test("requests: CompleteMultipartUpload lists parts in order with bare ETags", () => {
  const body = text(completeMultipartBody([
    { partNumber: 2, etag: '"bbb"' },
    { partNumber: 1, etag: "aaa" },
    { partNumber: 10, etag: 'W/"ccc"' },
  ]));
  assert.equal(
    body,
    '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      "<Part><PartNumber>1</PartNumber><ETag>aaa</ETag></Part>" +
      "<Part><PartNumber>2</PartNumber><ETag>bbb</ETag></Part>" +
      "<Part><PartNumber>10</PartNumber><ETag>ccc</ETag></Part></CompleteMultipartUpload>",
  );
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  const request = completeMultipartUpload(loc, "k", "u", [{ partNumber: 1, etag: "a" }], {
    ifAbsent: true,
  });
  assert.equal(request.headers["if-none-match"], "*");
  assert.deepEqual(request.query, [["uploadId", "u"]]);
});

Deno.test("requests: CreateBucket names the region outside us-east-1", () => {
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  assert.equal(createBucket(loc, "us-east-1").body, undefined);
  assert.match(
    text(createBucket(loc, "eu-west-1").body),
    /<LocationConstraint>eu-west-1<\/LocationConstraint>/,
  );
});

Deno.test("requests: checksums — CRC-64/NVME on puts and parts, full-object multipart, the mode on HEAD", () => {
  const loc = resolveLocation({
    endpoint: "http://h:9000",
    region: "r",
    bucket: "b",
    urlStyle: "path",
  });
  const checksum = { algorithm: "crc64nvme", value: "rosUhgp5mIg=" } as const;
  const put = putObject(loc, "k", new Uint8Array(1), { checksum });
  assert.equal(put.headers["x-amz-checksum-crc64nvme"], "rosUhgp5mIg=");
  const create = createMultipartUpload(loc, "k", { checksumAlgorithm: "crc64nvme" });
  assert.equal(create.headers["x-amz-checksum-algorithm"], "CRC64NVME");
  assert.equal(create.headers["x-amz-checksum-type"], "FULL_OBJECT");
  assert.equal(createMultipartUpload(loc, "k").headers["x-amz-checksum-algorithm"], undefined);
  assert.equal(
    uploadPart(loc, "k", "u", 1, new Uint8Array(1), checksum).headers["x-amz-checksum-crc64nvme"],
    "rosUhgp5mIg=",
  );
  assert.equal(
    text(completeMultipartBody([{ partNumber: 1, etag: "a", checksum: "x+/=" }])),
    '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      "<Part><PartNumber>1</PartNumber><ETag>a</ETag><ChecksumCRC64NVME>x+/=</ChecksumCRC64NVME></Part>" +
      "</CompleteMultipartUpload>",
  );
  assert.deepEqual(headObject(loc, "k", { checksums: true }).headers, {
    "x-amz-checksum-mode": "ENABLED",
  });
  assert.deepEqual(headObject(loc, "k").headers, {});
});
