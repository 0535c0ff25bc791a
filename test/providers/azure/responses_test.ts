// The pure Azure answer parsers on recorded-shape bodies: BOM-led XML, error codes from
// `x-ms-error-code` when there is no body (HEAD), listings with encoded names and markers, and
// malformed answers.
import assert from "node:assert/strict";
import {
  errorKind,
  metadataFromHeaders,
  parseErrorInfo,
  parseListBlobs,
  parseProperties,
  replaceRefusal,
} from "../../../providers/azure/responses.ts";
import { totalFromContentRange } from "../../../providers/http.ts";
import { StoreError } from "../../../providers/types.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const BOM = "\ufeff";

// The shape Azure (and Azurite) send for List Blobs: a BOM, then EnumerationResults.
const LISTING = BOM + `<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="https://acct.blob.core.windows.net/" ContainerName="tier">
  <Prefix>iggy/</Prefix>
  <MaxResults>2</MaxResults>
  <Blobs>
    <Blob>
      <Name>iggy/a&amp;b.log</Name>
      <Properties>
        <Creation-Time>Fri, 01 Mar 2024 12:00:00 GMT</Creation-Time>
        <Last-Modified>Fri, 01 Mar 2024 12:00:01 GMT</Last-Modified>
        <Etag>0x8DC39F2C4A1B2C3</Etag>
        <Content-Length>1234</Content-Length>
        <Content-Type>application/octet-stream</Content-Type>
        <BlobType>BlockBlob</BlobType>
      </Properties>
      <OrMetadata />
    </Blob>
    <Blob>
      <Name Encoded="true">iggy/ctl%01x</Name>
      <Properties>
        <Last-Modified>Fri, 01 Mar 2024 12:00:02 GMT</Last-Modified>
        <Etag>"0x8DC39F2C4A1B2C4"</Etag>
        <Content-Length>0</Content-Length>
      </Properties>
    </Blob>
  </Blobs>
  <NextMarker>2!72!MDAwMDEx</NextMarker>
</EnumerationResults>`;

Deno.test("azure responses: a List Blobs page with a BOM, entities, an encoded name and a marker", () => {
  const page = parseListBlobs(bytes(LISTING));
  assert.equal(page.nextMarker, "2!72!MDAwMDEx");
  assert.deepEqual(page.blobs.map((b) => b.key), ["iggy/a&b.log", "iggy/ctl\u0001x"]);
  assert.equal(page.blobs[0].size, 1234);
  assert.equal(page.blobs[0].etag, "0x8DC39F2C4A1B2C3");
  assert.equal(page.blobs[1].etag, "0x8DC39F2C4A1B2C4");
  assert.deepEqual(page.blobs[0].lastModified, new Date("2024-03-01T12:00:01Z"));
});

Deno.test("azure responses: the last page has an empty NextMarker; no blobs at all is fine", () => {
  const last = parseListBlobs(bytes(
    '<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs /><NextMarker /></EnumerationResults>',
  ));
  assert.deepEqual(last, { blobs: [] });
});

Deno.test("azure responses: malformed listings are Malformed, never half-read", () => {
  for (
    const body of [
      "<html>proxy error</html>",
      "<EnumerationResults><Blobs><Blob><Name>x</Name></Blob></Blobs></EnumerationResults>",
      "<EnumerationResults><Blobs><Blob><Name>x</Name><Properties><Content-Length>-1</Content-Length></Properties></Blob></Blobs></EnumerationResults>",
      "<EnumerationResults><Blobs>",
      "",
    ]
  ) {
    assert.throws(
      () => parseListBlobs(bytes(body)),
      (err: unknown) => err instanceof StoreError && err.kind === "Malformed",
      body,
    );
  }
});

Deno.test("azure responses: error code from x-ms-error-code (HEAD has no body), else from the XML", () => {
  const head = parseErrorInfo(
    404,
    new Headers({ "x-ms-error-code": "BlobNotFound" }),
    new Uint8Array(),
  );
  assert.equal(head.code, "BlobNotFound");
  assert.equal(head.message, "HTTP 404");
  const body = parseErrorInfo(
    403,
    new Headers({ date: "Fri, 01 Mar 2024 12:00:00 GMT" }),
    bytes(
      BOM + `<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code>` +
        `<Message>Server failed to authenticate the request.\nRequestId:abc\nTime:2024-03-01T12:00:00Z</Message>` +
        `<AuthenticationErrorDetail>The MAC signature found in the HTTP request 'x' is not the same as any computed signature.</AuthenticationErrorDetail></Error>`,
    ),
  );
  assert.equal(body.code, "AuthenticationFailed");
  assert.match(body.message, /^Server failed to authenticate the request\. \(The MAC signature/);
  assert.ok(!body.message.includes("RequestId"));
  assert.deepEqual(body.serverTime, new Date("2024-03-01T12:00:00Z"));
  const bare = parseErrorInfo(503, new Headers(), bytes("Service Unavailable"));
  assert.equal(bare.code, "ServerBusy");
  assert.match(bare.message, /unexpected error body: Service Unavailable/);
});

Deno.test("azure responses: error kinds by code, then by status", () => {
  const cases: Array<[string, number, string]> = [
    ["BlobNotFound", 404, "NotFound"],
    ["ContainerNotFound", 404, "NotFound"],
    ["BlobAlreadyExists", 409, "PreconditionFailed"],
    ["ConditionNotMet", 412, "PreconditionFailed"],
    ["InvalidBlockList", 400, "PreconditionFailed"],
    ["InvalidRange", 416, "InvalidRange"],
    ["ServerBusy", 503, "Throttled"],
    ["OperationTimedOut", 500, "Transport"],
    ["InternalError", 500, "Transport"],
    ["AuthenticationFailed", 403, "Auth"],
    ["AuthorizationPermissionMismatch", 403, "Auth"],
    ["Whatever", 429, "Throttled"],
    ["Whatever", 502, "Transport"],
    ["Whatever", 401, "Auth"],
    ["InvalidMetadata", 400, "Unsupported"],
  ];
  for (const [code, status, kind] of cases) assert.equal(errorKind(code, status), kind, code);
});

Deno.test("azure responses: a refused If-Match Put Blob is PreconditionFailed", () => {
  // Azurite 3.35's answer to If-Match with a stale ETag and on a missing blob alike.
  const azurite = bytes(
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Error>\n  <Code>ConditionNotMet</Code>\n' +
      "  <Message>The condition specified using HTTP conditional header(s) is not met.\n" +
      "RequestId:50763048-ff90-48fe-83c4-892b4b3e0ea9\nTime:2026-12-01T23:23:44.125Z</Message>\n</Error>",
  );
  const headers = (code: string) => new Headers({ "x-ms-error-code": code });
  const stale = replaceRefusal(parseErrorInfo(412, headers("ConditionNotMet"), azurite), "owner");
  assert.equal(stale?.kind, "PreconditionFailed");
  assert.equal(stale.detail.code, "ConditionNotMet");
  assert.doesNotMatch(stale.message, /RequestId/);
  // Azure's own answer for a missing blob may be 404 BlobNotFound: nothing to replace.
  const absent = replaceRefusal(
    parseErrorInfo(404, headers("BlobNotFound"), new Uint8Array()),
    "owner",
  );
  assert.equal(absent?.kind, "PreconditionFailed");
  assert.match(absent.message, /no blob to replace/);
  for (
    const [status, code] of [[404, "ContainerNotFound"], [409, "LeaseIdMissing"], [
      503,
      "ServerBusy",
    ]] as const
  ) {
    assert.equal(
      replaceRefusal(parseErrorInfo(status, headers(code), new Uint8Array()), "k"),
      undefined,
      code,
    );
  }
});

Deno.test("azure responses: blob properties, metadata names decoded back", () => {
  const headers = new Headers({
    "content-length": "4321",
    etag: '"0x8DC"',
    "last-modified": "Fri, 01 Mar 2024 12:00:00 GMT",
    "x-ms-meta-end_offset": "1041",
    "x-ms-meta-xxh3_128": "0123",
    "x-ms-meta-Format": "iggy-0.9",
    "x-ms-blob-type": "BlockBlob",
  });
  const head = parseProperties("k", headers);
  assert.deepEqual(head, {
    key: "k",
    size: 4321,
    etag: "0x8DC",
    version: '"0x8DC"',
    lastModified: new Date("2024-03-01T12:00:00Z"),
    metadata: { "end-offset": "1041", "xxh3-128": "0123", format: "iggy-0.9" },
  });
  assert.deepEqual(metadataFromHeaders(new Headers()), {});
  // A blob's Content-MD5 (Put Blob's own, or Put Block List's x-ms-blob-content-md5).
  headers.set("content-md5", "lXpb8WJjKFlucqk+jKAQrQ==");
  assert.deepEqual(parseProperties("k", headers).checksums, [
    { algorithm: "md5", value: "lXpb8WJjKFlucqk+jKAQrQ==", type: "full" },
  ]);
  assert.throws(
    () => parseProperties("k", new Headers()),
    (err: unknown) => err instanceof StoreError && err.kind === "Malformed",
  );
});

Deno.test("azure responses: Content-Range totals", () => {
  assert.equal(totalFromContentRange("bytes 0-9/1000"), 1000);
  assert.equal(totalFromContentRange("bytes 1000-999/1000"), 1000);
  assert.equal(totalFromContentRange("bytes */1000"), 1000);
  assert.equal(totalFromContentRange("bytes 0-9/*"), undefined);
  assert.equal(totalFromContentRange(null), undefined);
});
