// The S3 response parsers on recorded answers: MinIO's (recorded by a signed client against the
// pinned MinIO) and AWS's documented shapes, plus broken bodies.
import assert from "node:assert/strict";
import {
  errorKind,
  parseCompleteMultipart,
  parseDeleteResult,
  parseErrorInfo,
  parseHead,
  parseInitiateMultipart,
  parseListMultipartUploads,
  parseListObjectsV2,
  replaceRefusal,
  s3Error,
  S3ErrorInfo,
} from "../../../providers/s3/responses.ts";
import { totalFromContentRange } from "../../../providers/http.ts";
import { StoreError, type StoreErrorKind } from "../../../providers/types.ts";

const fixture = (name: string) =>
  Deno.readFileSync(new URL(`./fixtures/${name}.body`, import.meta.url));

function assertStoreError(fn: () => unknown, kind: StoreErrorKind, code?: string): StoreError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof StoreError, `expected a StoreError, got ${caught}`);
  assert.equal(caught.kind, kind, caught.message);
  if (code) assert.equal(caught.detail.code, code);
  return caught;
}

Deno.test("responses: MinIO ListObjectsV2 pages, URL-encoded keys, continuation token", () => {
  const page1 = parseListObjectsV2(fixture("minio-list-objects-v2-page1.xml"));
  assert.deepEqual(page1.objects.map((o) => o.key), [
    "logs/a b+c.log",
    "logs/ctl\u0001.log",
    "logs/x=1&y?.log",
  ]);
  assert.deepEqual(page1.objects.map((o) => o.size), [14, 13, 15]);
  assert.equal(page1.objects[0].etag, "7d94671fed8e9383f219aee3c4d56104", "ETag unquoted");
  assert.equal(page1.objects[0].lastModified?.toISOString(), "2026-11-30T04:05:39.988Z");
  assert.equal(page1.continuationToken, "bG9ncy94PTEmeT8ubG9nW21pbmlvX2NhY2hlOnYyLHJldHVybjpd");
  const page2 = parseListObjectsV2(fixture("minio-list-objects-v2-page2.xml"));
  assert.deepEqual(page2.objects.map((o) => o.key), ["logs/z.log", "logs/ünï😀.log"]);
  assert.equal(page2.continuationToken, undefined);
});

Deno.test("responses: AWS ListObjectsV2 without URL encoding, entities decoded", () => {
  const page = parseListObjectsV2(fixture("aws-list-objects-v2-plain.xml"));
  assert.deepEqual(page.objects.map((o) => o.key), [
    "iggy/a & b <c> \r.log",
    "iggy/00000000000000000001",
  ]);
  assert.deepEqual(page.objects.map((o) => o.size), [857, 0]);
  assert.equal(page.objects[0].etag, "599bab3ed2c697f1d26842727561fd94");
  assert.equal(
    page.objects[1].key,
    "iggy/00000000000000000001",
    "numeric-looking keys stay strings",
  );
});

Deno.test("responses: broken listings are Malformed", () => {
  assertStoreError(
    () => parseListObjectsV2(fixture("aws-list-objects-v2-bad-size.xml")),
    "Malformed",
  );
  assertStoreError(
    () => parseListObjectsV2(fixture("aws-list-objects-v2-truncated-no-token.xml")),
    "Malformed",
  );
  const truncated = assertStoreError(
    () => parseListObjectsV2(fixture("malformed-truncated-list.xml")),
    "Malformed",
  );
  assert.match(truncated.message, /malformed XML/);
  assert.match(truncated.message, /<ListBucketResult/, "the message carries a snippet of the body");
  assertStoreError(() => parseListObjectsV2(fixture("proxy-502.html")), "Malformed");
  assertStoreError(() => parseListObjectsV2(new Uint8Array(0)), "Malformed");
});

Deno.test("responses: DeleteObjects per-key errors; NoSuchKey is not a failure", () => {
  const failures = parseDeleteResult(fixture("aws-delete-objects-result.xml"));
  assert.deepEqual(failures.map((f) => [f.key, f.error.kind, f.error.detail.code]), [
    ["iggy/local/1/1/0/00000000000000001000.log", "Auth", "AccessDenied"],
    ["iggy/local/1/1/0/00000000000000002000 & more.log", "Transport", "InternalError"],
    ["iggy/local/1/1/0/busy.log", "Throttled", "SlowDown"],
  ]);
  assert.match(failures[0].error.message, /Access Denied/);
});

Deno.test("responses: CompleteMultipartUpload result and the 200 that carries <Error>", () => {
  assert.equal(
    parseCompleteMultipart(fixture("aws-complete-multipart-result.xml"), "big.log"),
    "3858f62230ac3c915f300c664312c11f-9",
  );
  const err = assertStoreError(
    () => parseCompleteMultipart(fixture("aws-complete-multipart-200-error.xml"), "big.log"),
    "Transport",
    "InternalError",
  );
  assert.equal(err.detail.key, "big.log");
  assert.equal(err.detail.op, "completeMultipart");
});

Deno.test("responses: multipart initiate and listings (MinIO and AWS, paged)", () => {
  assert.match(
    parseInitiateMultipart(fixture("minio-initiate-multipart.xml"), "logs/big.log"),
    /^[A-Za-z0-9=]+$/,
  );
  const minio = parseListMultipartUploads(fixture("minio-list-multipart-uploads.xml"));
  assert.deepEqual(minio.uploads.map((u) => u.key), ["logs/big.log"]);
  assert.equal(minio.next, undefined);
  const aws = parseListMultipartUploads(fixture("aws-list-multipart-uploads-truncated.xml"));
  assert.deepEqual(aws.uploads.map((u) => [u.key, u.uploadId]), [
    ["iggy/a.log", "a-upload-1"],
    ["iggy/b c.log", "b-upload-2"],
  ]);
  assert.deepEqual(aws.next, { keyMarker: "iggy/b c.log", uploadIdMarker: "b-upload-2" });
  assert.equal(aws.uploads[0].initiated?.toISOString(), "2010-11-10T20:48:33.000Z");
});

const ERROR_FIXTURES: Array<[string, number, StoreErrorKind, string]> = [
  ["minio-error-no-such-key.xml", 404, "NotFound", "NoSuchKey"],
  ["minio-error-no-such-bucket.xml", 404, "NotFound", "NoSuchBucket"],
  ["minio-error-no-such-upload.xml", 404, "NotFound", "NoSuchUpload"],
  ["minio-error-signature-does-not-match.xml", 403, "Auth", "SignatureDoesNotMatch"],
  ["minio-error-invalid-access-key-id.xml", 403, "Auth", "InvalidAccessKeyId"],
  ["minio-error-authorization-header-malformed.xml", 400, "Auth", "AuthorizationHeaderMalformed"],
  ["minio-error-request-time-too-skewed.xml", 403, "Auth", "RequestTimeTooSkewed"],
  ["minio-error-invalid-range.xml", 416, "InvalidRange", "InvalidRange"],
  ["minio-error-precondition-failed.xml", 412, "PreconditionFailed", "PreconditionFailed"],
  ["minio-error-invalid-part.xml", 400, "PreconditionFailed", "InvalidPart"],
  ["minio-error-malformed-xml.xml", 400, "Unsupported", "MalformedXML"],
  ["minio-error-missing-content-md5.xml", 400, "Unsupported", "MissingContentMD5"],
  ["aws-error-slow-down.xml", 503, "Throttled", "SlowDown"],
  ["aws-error-internal-error.xml", 500, "Transport", "InternalError"],
  ["aws-error-access-denied.xml", 403, "Auth", "AccessDenied"],
  ["aws-error-expired-token.xml", 400, "Auth", "ExpiredToken"],
  ["aws-error-permanent-redirect.xml", 301, "Auth", "PermanentRedirect"],
  ["aws-error-authorization-header-malformed.xml", 400, "Auth", "AuthorizationHeaderMalformed"],
  ["aws-error-conditional-request-conflict.xml", 409, "Transport", "ConditionalRequestConflict"],
  ["aws-error-not-implemented.xml", 501, "Unsupported", "NotImplemented"],
];

Deno.test("responses: every recorded error code maps to its kind", () => {
  for (const [name, status, kind, code] of ERROR_FIXTURES) {
    const info = parseErrorInfo(status, new Headers(), fixture(name));
    assert.equal(info.code, code, name);
    const err = s3Error(info, "get", "k");
    assert.equal(err.kind, kind, name);
    assert.equal(err.detail.status, status, name);
    assert.equal(err.detail.code, code, name);
    assert.ok(err.cause instanceof S3ErrorInfo);
    assert.ok(err.message.includes(code) && err.message.startsWith("get k: "), err.message);
  }
});

Deno.test("responses: a refused If-Match put is PreconditionFailed, absent key included", () => {
  const refused = (name: string, status: number) =>
    replaceRefusal(parseErrorInfo(status, new Headers(), fixture(name)), "owner");
  // Recorded from the pinned MinIO: PutObject with If-Match on a key with another ETag, and on
  // a missing key (AWS answers the same: 404 NoSuchKey, nothing to replace).
  const changed = refused("minio-error-if-match-precondition-failed.xml", 412);
  assert.equal(changed?.kind, "PreconditionFailed");
  assert.equal(changed.detail.code, "PreconditionFailed");
  const absent = refused("minio-error-if-match-no-such-key.xml", 404);
  assert.equal(absent?.kind, "PreconditionFailed");
  assert.equal(absent.detail.code, "NoSuchKey");
  assert.equal(absent.detail.status, 404);
  assert.match(absent.message, /^put owner: 404 NoSuchKey: .*no object to replace/);
  assert.ok(absent.cause instanceof S3ErrorInfo);
  // Not about the condition: the usual mapping decides.
  assert.equal(refused("minio-error-no-such-bucket.xml", 404), undefined);
  assert.equal(refused("aws-error-conditional-request-conflict.xml", 409), undefined);
  assert.equal(refused("aws-error-access-denied.xml", 403), undefined);
  const bodiless = replaceRefusal(parseErrorInfo(412, new Headers(), new Uint8Array(0)), "k");
  assert.equal(bodiless?.kind, "PreconditionFailed");
  const secret = replaceRefusal(
    new S3ErrorInfo("NoSuchKey", "no key SECRET", 404),
    "k",
    { redact: (t) => t.replaceAll("SECRET", "[redacted]") },
  );
  assert.doesNotMatch(`${secret?.message} ${(secret?.cause as Error).message}`, /SECRET/);
});

Deno.test("responses: region and endpoint hints, entity-decoded messages", () => {
  const aws = parseErrorInfo(
    400,
    new Headers(),
    fixture("aws-error-authorization-header-malformed.xml"),
  );
  assert.equal(aws.region, "eu-west-1");
  assert.match(s3Error(aws, "list", undefined).message, /the bucket's region is 'eu-west-1'/);
  const minio = parseErrorInfo(
    400,
    new Headers(),
    fixture("minio-error-authorization-header-malformed.xml"),
  );
  assert.equal(
    minio.message,
    "The authorization header is malformed; the region is wrong; expecting 'us-east-1'.",
  );
  assert.equal(minio.region, "us-east-1");
  const redirect = parseErrorInfo(
    301,
    new Headers({ "x-amz-bucket-region": "eu-west-1" }),
    fixture("aws-error-permanent-redirect.xml"),
  );
  assert.equal(redirect.endpoint, "examplebucket.s3.eu-west-1.amazonaws.com");
  assert.equal(redirect.region, "eu-west-1");
});

Deno.test("responses: bodiless and non-XML error answers", () => {
  const head404 = parseErrorInfo(404, new Headers(), new Uint8Array(0));
  assert.equal(errorKind(head404.code, 404), "NotFound");
  const head403 = s3Error(parseErrorInfo(403, new Headers(), new Uint8Array(0)), "head", "k");
  assert.equal(head403.kind, "Auth");
  const date = "Fri, 24 May 2013 00:00:00 GMT";
  assert.equal(
    parseErrorInfo(403, new Headers({ date }), new Uint8Array(0)).serverTime?.toISOString(),
    "2013-05-24T00:00:00.000Z",
  );
  const proxy = parseErrorInfo(502, new Headers(), fixture("proxy-502.html"));
  assert.equal(errorKind(proxy.code, 502), "Transport");
  assert.match(proxy.message, /502 Bad Gateway/, "a snippet of the unexpected body");
  assert.equal(errorKind("TooManyRequests", 429), "Throttled");
  assert.equal(errorKind("Whatever", 503), "Throttled");
  assert.equal(errorKind("Whatever", 401), "Auth");
  assert.equal(errorKind("Whatever", 400), "Unsupported");
});

Deno.test("responses: HEAD headers and Content-Range", () => {
  const head = parseHead(
    "k",
    new Headers({
      "content-length": "4321",
      etag: '"abc"',
      "last-modified": "Fri, 24 May 2013 00:00:00 GMT",
      "x-amz-meta-end-offset": "1041",
      "X-Amz-Meta-Format": "iggy-0.9",
      "content-type": "application/octet-stream",
    }),
  );
  assert.deepEqual(head, {
    key: "k",
    size: 4321,
    etag: "abc",
    version: "abc",
    lastModified: new Date("2013-05-24T00:00:00Z"),
    metadata: { "end-offset": "1041", format: "iggy-0.9" },
  });
  assert.throws(() => parseHead("k", new Headers()), StoreError);
  // With x-amz-checksum-mode: ENABLED (what MinIO answers): full-object unless composite.
  const checked = (headers: Record<string, string>) =>
    parseHead("k", new Headers({ "content-length": "1", ...headers })).checksums;
  assert.deepEqual(
    checked({ "x-amz-checksum-crc64nvme": "COIxExZ9Lt8=", "x-amz-checksum-type": "FULL_OBJECT" }),
    [{ algorithm: "crc64nvme", value: "COIxExZ9Lt8=", type: "full" }],
  );
  assert.deepEqual(checked({ "x-amz-checksum-crc32c": "VtCd3Q==-2" }), [
    { algorithm: "crc32c", value: "VtCd3Q==", type: "composite" },
  ]);
  assert.deepEqual(
    checked({ "x-amz-checksum-crc32c": "VtCd3Q==", "x-amz-checksum-type": "COMPOSITE" }),
    [{ algorithm: "crc32c", value: "VtCd3Q==", type: "composite" }],
  );
  assert.deepEqual(checked({ "x-amz-checksum-sha256": "abc=" }), [
    { algorithm: "sha256", value: "abc=", type: "full" },
  ], "as answered (comparableChecksum sets aside a value of the wrong length)");
  assert.deepEqual(checked({ etag: '"d41d8cd98f00b204e9800998ecf8427e"' }), [
    { algorithm: "md5", value: "1B2M2Y8AsgTpgAmY7PhCfg==", type: "full" },
  ], "a single PUT's ETag is offered as its MD5");
  assert.equal(checked({ etag: '"d41d8cd98f00b204e9800998ecf8427e-2"' }), undefined, "multipart");
  assert.equal(totalFromContentRange("bytes 0-9/1000"), 1000);
  assert.equal(totalFromContentRange("bytes */1000"), 1000);
  assert.equal(totalFromContentRange("bytes 0-9/*"), undefined);
  assert.equal(totalFromContentRange(null), undefined);
});
