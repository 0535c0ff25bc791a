// AzureStore over an injected fetch: conditional creates, throttling, auth failures, resets,
// truncated and malformed answers, clock skew, SAS URLs, multipart bookkeeping — and that no
// error ever carries the account key or the SAS token.
import assert from "node:assert/strict";
import { AzureStore, type AzureStoreOptions } from "../../../providers/azure/store.ts";
import { blockId } from "../../../providers/azure/requests.ts";
import { listBounded } from "../../../providers/listing.ts";
import type { FetchFn } from "../../../providers/http.ts";
import type { StoreErrorKind } from "../../../providers/types.ts";
import { assertNoLeak, type FakeHandler, recordingFetch, rejectsWithCode } from "../_faults.ts";
import { readingClock } from "../../_fake_clock.ts";

const KEY = "c2VjcmV0LWFjY291bnQta2V5LWZvci10ZXN0cy0wMTIzNDU2Nzg5";
const SAS =
  "sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00%3A00%3A00Z&sig=U2lnbmF0dXJlU2VjcmV0VmFsdWU%3D";
const SIG_DECODED = "U2lnbmF0dXJlU2VjcmV0VmFsdWU=";
const NOW = new Date("2026-03-01T12:00:00Z");

function fakeAzure(handler: FakeHandler, options: Partial<AzureStoreOptions> = {}) {
  const { fetch, seen } = recordingFetch(handler);
  const store = new AzureStore({
    account: "acct",
    container: "tier",
    endpoint: "http://azure.test:10000/acct",
    sharedKey: KEY,
    fetch,
    clock: readingClock(() => NOW.getTime()),
    ...options,
  });
  return { store, seen };
}

const azureError = (
  status: number,
  code: string,
  message = code,
  headers: Record<string, string> = {},
) =>
  new Response(
    `\ufeff<?xml version="1.0" encoding="utf-8"?><Error><Code>${code}</Code><Message>${message}\nRequestId:r\nTime:t</Message></Error>`,
    { status, headers: { "content-type": "application/xml", "x-ms-error-code": code, ...headers } },
  );

const rejectsWith = rejectsWithCode(assertNoSecrets);

function assertNoSecrets(value: unknown): void {
  const secrets = [KEY, SAS, SIG_DECODED, encodeURIComponent(SIG_DECODED)];
  assertNoLeak(value, secrets.map((secret) => [secret, "a secret"] as const));
}

Deno.test("azure faults: requests are signed with SharedKey and the date header", async () => {
  const { store, seen } = fakeAzure(() =>
    new Response(null, { status: 201, headers: { etag: '"0x1"' } })
  );
  assert.deepEqual(await store.put("a b/c", new Uint8Array([1])), {
    status: "Created",
    etag: "0x1",
    version: '"0x1"',
  });
  const [put] = seen;
  assert.equal(put.url, "http://azure.test:10000/acct/tier/a%20b/c");
  assert.match(put.headers["authorization"], /^SharedKey acct:[A-Za-z0-9+/]+=*$/);
  assert.equal(put.headers["x-ms-date"], NOW.toUTCString());
  assert.equal(put.headers["content-type"], "application/octet-stream");
  assert.equal(put.headers["content-length"], "1");
});

Deno.test("azure faults: a SAS token goes on every URL and no Authorization header is sent", async () => {
  const { store, seen } = fakeAzure(
    (request) =>
      request.method === "GET"
        ? new Response(
          '<?xml version="1.0"?><EnumerationResults><Blobs/><NextMarker/></EnumerationResults>',
        )
        : new Response(null, { status: 201 }),
    { sharedKey: undefined, sasToken: "?" + SAS },
  );
  await store.put("k", new Uint8Array(1));
  await store.list("p/", { maxKeys: 1 });
  assert.equal(seen[0].url, `http://azure.test:10000/acct/tier/k?${SAS}`);
  assert.equal(
    seen[1].url,
    `http://azure.test:10000/acct/tier?restype=container&comp=list&prefix=p%2F&maxresults=1&${SAS}`,
  );
  for (const request of seen) assert.equal(request.headers["authorization"], undefined);
  assert.equal(store.auth, "sas");
  assertNoSecrets(store);
  assertNoSecrets(JSON.stringify(store));
});

Deno.test("azure faults: If-Match — 412 ConditionNotMet and 404 BlobNotFound are PreconditionFailed", async () => {
  const ok = fakeAzure(() => new Response(null, { status: 201, headers: { etag: '"0x2"' } }));
  assert.deepEqual(await ok.store.put("k", new Uint8Array(1), { ifMatch: '"0x1"' }), {
    status: "Created",
    etag: "0x2",
    version: '"0x2"',
  });
  assert.equal(ok.seen[0].headers["if-match"], '"0x1"', "the ETag exactly as Azure sent it");
  const stale = fakeAzure(() => azureError(412, "ConditionNotMet"));
  await rejectsWith(
    stale.store.put("k", new Uint8Array(1), { ifMatch: '"0x1"' }),
    "PreconditionFailed",
    "ConditionNotMet",
  );
  const absent = fakeAzure(() => azureError(404, "BlobNotFound"));
  await rejectsWith(
    absent.store.put("k", new Uint8Array(1), { ifMatch: '"0x1"' }),
    "PreconditionFailed",
    "BlobNotFound",
  );
  const noContainer = fakeAzure(() => azureError(404, "ContainerNotFound"));
  await rejectsWith(
    noContainer.store.put("k", new Uint8Array(1), { ifMatch: '"0x1"' }),
    "NotFound",
    "ContainerNotFound",
  );
  // Without If-Match a 404 BlobNotFound on a put keeps its kind.
  await rejectsWith(absent.store.put("k", new Uint8Array(1)), "NotFound", "BlobNotFound");
  await assert.rejects(
    ok.store.put("k", new Uint8Array(1), { ifAbsent: true, ifMatch: '"0x1"' }),
    RangeError,
  );
  assert.equal(ok.seen.length, 1, "nothing sent for contradictory conditions");
});

Deno.test("azure faults: If-None-Match on an existing blob is AlreadyExists (409 or 412)", async () => {
  for (
    const answer of [
      () => azureError(409, "BlobAlreadyExists"),
      () => azureError(412, "ConditionNotMet"),
    ]
  ) {
    const { store, seen } = fakeAzure(answer);
    assert.deepEqual(await store.put("k", new Uint8Array(1), { ifAbsent: true }), {
      status: "AlreadyExists",
    });
    assert.equal(seen[0].headers["if-none-match"], "*");
  }
  // Another 409 (a lease) is a failure, not "already exists".
  const { store } = fakeAzure(() => azureError(409, "LeaseIdMissing"));
  await rejectsWith(
    store.put("k", new Uint8Array(1), { ifAbsent: true }),
    "PreconditionFailed",
    "LeaseIdMissing",
  );
  // Without ifAbsent a 409 is never swallowed.
  const plain = fakeAzure(() => azureError(409, "BlobAlreadyExists")).store;
  await rejectsWith(plain.put("k", new Uint8Array(1)), "PreconditionFailed", "BlobAlreadyExists");
});

Deno.test("azure faults: throttling, server errors, auth and resets map to typed errors", async () => {
  const cases: Array<[() => Response | Promise<Response>, StoreErrorKind, string]> = [
    [
      () => azureError(503, "ServerBusy", "Ingress is over the account limit."),
      "Throttled",
      "ServerBusy",
    ],
    [() => new Response("", { status: 429 }), "Throttled", "TooManyRequests"],
    [() => azureError(500, "OperationTimedOut"), "Transport", "OperationTimedOut"],
    [() => azureError(500, "InternalError"), "Transport", "InternalError"],
    [
      () => azureError(403, "AuthenticationFailed", "Server failed to authenticate the request."),
      "Auth",
      "AuthenticationFailed",
    ],
    [
      () => azureError(403, "AuthorizationPermissionMismatch"),
      "Auth",
      "AuthorizationPermissionMismatch",
    ],
    [
      () => azureError(404, "ContainerNotFound", "The specified container does not exist."),
      "NotFound",
      "ContainerNotFound",
    ],
  ];
  for (const [answer, kind, code] of cases) {
    const { store } = fakeAzure(answer);
    const err = await rejectsWith(store.list("p/"), kind, code);
    if (code === "ContainerNotFound") assert.match(err.message, /container 'tier' does not exist/);
    if (code === "AuthenticationFailed") {
      assert.match(err.message, /shared key does not match account 'acct'/);
    }
  }
  const reset = fakeAzure(() => Promise.reject(new TypeError("connection reset by peer"))).store;
  await rejectsWith(reset.get("k"), "Transport");
});

Deno.test("azure faults: a HEAD 404 reads its code from x-ms-error-code", async () => {
  const { store } = fakeAzure(() =>
    new Response(null, { status: 404, headers: { "x-ms-error-code": "BlobNotFound" } })
  );
  const err = await rejectsWith(store.head("missing"), "NotFound", "BlobNotFound");
  assert.equal(err.detail.status, 404);
  assert.equal(err.detail.key, "missing");
});

Deno.test("azure faults: ranged gets, 416 and Azurite's empty 206 are InvalidRange", async () => {
  const blob = new TextEncoder().encode("0123456789");
  const { store, seen } = fakeAzure((request) => {
    const range = /bytes=(\d+)-(\d+)/.exec(request.headers["x-ms-range"] ?? "");
    if (!range) return new Response(blob);
    const start = Number(range[1]);
    if (start > blob.length) return azureError(416, "InvalidRange");
    const end = Math.min(Number(range[2]), blob.length - 1);
    // Azurite 3.35 answers a range starting exactly at the end with an empty 206.
    return new Response(blob.slice(start, end + 1), {
      status: 206,
      headers: { "content-range": `bytes ${start}-${end}/${blob.length}` },
    });
  });
  const got = await store.get("k", { range: { start: 8, length: 5 } });
  assert.equal(new TextDecoder().decode(got.bytes), "89");
  assert.equal(got.size, 10);
  assert.equal(seen[0].headers["x-ms-range"], "bytes=8-12");
  await rejectsWith(store.get("k", { range: { start: 10, length: 1 } }), "InvalidRange");
  await rejectsWith(
    store.get("k", { range: { start: 50, length: 1 } }),
    "InvalidRange",
    "InvalidRange",
  );
  await rejectsWith(store.get("k", { range: { start: -1, length: 1 } }), "InvalidRange");
});

Deno.test("azure faults: truncated and malformed answers", async () => {
  const truncated =
    fakeAzure(() => new Response("abc", { headers: { "content-length": "10" } })).store;
  await rejectsWith(truncated.get("k"), "Transport");
  const html = fakeAzure(() => new Response("<html><body>captive portal</body></html>")).store;
  await rejectsWith(html.list("p/"), "Malformed");
  const noLength = fakeAzure(() => new Response(null, { status: 200 })).store;
  await rejectsWith(noLength.head("k"), "Malformed");
});

Deno.test("azure faults: a 403 from a server whose clock is far off is re-signed once on its clock", async () => {
  const serverNow = new Date(NOW.getTime() + 30 * 60_000);
  const { store, seen } = fakeAzure((_request, n) =>
    n === 1
      ? azureError(403, "AuthenticationFailed", "Request date header too old", {
        date: serverNow.toUTCString(),
      })
      : new Response(null, { status: 201 })
  );
  await store.put("k", new Uint8Array(1));
  assert.equal(seen.length, 2);
  assert.equal(seen[1].headers["x-ms-date"], serverNow.toUTCString());
  // A 403 from a server with our time is a plain auth failure, not retried.
  const plain = fakeAzure(() =>
    azureError(403, "AuthenticationFailed", "x", { date: NOW.toUTCString() })
  );
  await rejectsWith(plain.store.put("k", new Uint8Array(1)), "Auth");
  assert.equal(plain.seen.length, 1);
});

Deno.test("azure faults: secrets never appear in errors, even when the network error names the URL", async () => {
  // Deno's fetch errors quote the URL, and with a SAS the URL carries the signature.
  const failing: FetchFn = (url) =>
    Promise.reject(new TypeError(`error sending request for url (${url}): connection refused`));
  const sas = new AzureStore({
    account: "acct",
    container: "tier",
    endpoint: "http://azure.test:1/acct",
    sasToken: SAS,
    fetch: failing,
  });
  const err = await rejectsWith(sas.list("p/"), "Transport");
  assert.match(err.message, /\[redacted\]/);
  let cause: unknown = err.cause;
  while (cause instanceof Error) {
    assertNoSecrets(cause.message);
    cause = cause.cause;
  }
  // A server that echoes the key back in its message.
  const echo = fakeAzure(() => azureError(400, "InvalidHeaderValue", `bad key ${KEY}`)).store;
  await rejectsWith(echo.put("k", new Uint8Array(1)), "Unsupported", "InvalidHeaderValue");
  assertNoSecrets(echo);
  assertNoSecrets(JSON.stringify(echo));
  assertNoSecrets(Deno.inspect(echo));
});

Deno.test("azure faults: a store needs a key or a SAS, and a base64 key", () => {
  assert.throws(() => new AzureStore({ account: "a", container: "c" }), TypeError);
  assert.throws(
    () => new AzureStore({ account: "a", container: "c", sharedKey: "not base64!" }),
    TypeError,
  );
});

Deno.test("azure faults: deleteMany treats 404 as done, keeps refused keys, stops on auth", async () => {
  const { store, seen } = fakeAzure((request) =>
    request.url.endsWith("/gone")
      ? new Response(null, { status: 404, headers: { "x-ms-error-code": "BlobNotFound" } })
      : request.url.endsWith("/leased")
      ? azureError(412, "LeaseIdMissing")
      : new Response(null, { status: 202 })
  );
  const failures = await store.deleteMany(["a", "gone", "leased", "a", "x/./y"]);
  assert.deepEqual(failures.map((f) => [f.key, f.error.detail.code]).sort(), [
    ["leased", "LeaseIdMissing"],
    ["x/./y", "InvalidKey"],
  ]);
  assert.equal(seen.filter((r) => r.method === "DELETE").length, 3, "each distinct valid key once");
  assert.equal(seen[0].headers["x-ms-delete-snapshots"], "include");
  const denied = fakeAzure(() => azureError(403, "AuthorizationPermissionMismatch")).store;
  await rejectsWith(denied.deleteMany(["a", "b"]), "Auth");
});

Deno.test("azure faults: multipart completion commits the staged block ids in part order", async () => {
  const uploadId = "0123456789abcdef0123456789abcdef";
  const { store, seen } = fakeAzure((request) => {
    if (request.method === "HEAD") {
      return new Response(null, {
        headers: {
          "content-length": "0",
          "content-type": "application/x-iggy",
          "x-ms-meta-end_offset": "9",
        },
      });
    }
    return new Response(null, { status: request.method === "DELETE" ? 202 : 201 });
  });
  const parts = [2, 1].map((n) => ({ partNumber: n, etag: blockId(uploadId, n) }));
  assert.equal((await store.completeMultipart("k", uploadId, parts)).status, "Created");
  const [head, commit, removeMarker] = seen;
  assert.equal(head.url, `http://azure.test:10000/acct/tier/.tierd-multipart/k/${uploadId}`);
  assert.equal(commit.url, "http://azure.test:10000/acct/tier/k?comp=blocklist");
  assert.equal(commit.headers["x-ms-meta-end_offset"], "9");
  assert.equal(commit.headers["x-ms-blob-content-type"], "application/x-iggy");
  assert.equal(
    new TextDecoder().decode(commit.body),
    `<?xml version="1.0" encoding="utf-8"?><BlockList><Latest>${
      blockId(uploadId, 1)
    }</Latest><Latest>${blockId(uploadId, 2)}</Latest></BlockList>`,
  );
  assert.equal(removeMarker.method, "DELETE");
  // A part this upload did not stage is refused before any request.
  await rejectsWith(
    store.completeMultipart("k", uploadId, [{ partNumber: 1, etag: blockId("f".repeat(32), 1) }]),
    "PreconditionFailed",
    "InvalidPart",
  );
  await rejectsWith(
    store.completeMultipart("k", uploadId, []),
    "PreconditionFailed",
    "InvalidPart",
  );
  await rejectsWith(store.completeMultipart("k", "not-ours", parts), "NotFound", "NoSuchUpload");
});

Deno.test("azure faults: completing an upload whose marker is gone is NotFound (NoSuchUpload)", async () => {
  const { store } = fakeAzure(() =>
    new Response(null, { status: 404, headers: { "x-ms-error-code": "BlobNotFound" } })
  );
  const uploadId = "0123456789abcdef0123456789abcdef";
  await rejectsWith(
    store.completeMultipart("k", uploadId, [{ partNumber: 1, etag: blockId(uploadId, 1) }]),
    "NotFound",
    "NoSuchUpload",
  );
});

Deno.test("azure faults: a NextMarker that loops ends a listing with ListingLoop", async () => {
  // Past 50 requests a 500: a listing that never ends fails the test instead of hanging it.
  const looping = (_request: unknown, n: number) =>
    n > 50 ? azureError(500, "InternalError") : new Response(
      `<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs><Blob>` +
        `<Name>.tierd-multipart/p/k/${n}</Name><Properties><Content-Length>0</Content-Length>` +
        `</Properties></Blob></Blobs><NextMarker>again</NextMarker></EnumerationResults>`,
      { headers: { "content-type": "application/xml" } },
    );
  const { store, seen } = fakeAzure(looping);
  const err = await rejectsWith(store.listMultipartUploads("p/"), "Malformed", "ListingLoop");
  assert.ok(
    err.message.startsWith(
      `azure ${store.endpoint} container 'tier': listMultipartUploads of prefix ` +
        `".tierd-multipart/p/" stopped after 2 pages`,
    ),
    err.message,
  );
  assert.equal(seen.length, 2);
  assert.equal(new URL(seen[1].url).searchParams.get("marker"), "again");

  const listed = fakeAzure(looping);
  await rejectsWith(listBounded(listed.store, "p/"), "Malformed", "ListingLoop");
  assert.equal(listed.seen.length, 2);
});
