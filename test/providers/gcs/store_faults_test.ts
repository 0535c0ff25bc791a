// GcsStore over an injected fetch: conditional creates and composes (real GCS answers 412),
// a 401 refreshed once out of band, throttling, auth failures, resets, truncated and malformed
// answers — and that no error ever carries a bearer token.
import assert from "node:assert/strict";
import { checksumOf } from "../../../providers/checksum.ts";
import { NoTokenSource, type TokenSource } from "../../../providers/gcs/credentials.ts";
import { GcsStore, type GcsStoreOptions } from "../../../providers/gcs/store.ts";
import { listBounded } from "../../../providers/listing.ts";
import type { StoreErrorKind } from "../../../providers/types.ts";
import { assertNoLeak, type FakeHandler, recordingFetch, rejectsWithCode } from "../_faults.ts";

const TOKEN_PREFIX = "ya29.secret-bearer-";

/** A token source that counts refreshes: token N is `ya29.secret-bearer-N`. */
class CountingTokens implements TokenSource {
  readonly describe = "test tokens";
  issued = 1;
  invalidated: string[] = [];
  token(): Promise<string> {
    return Promise.resolve(TOKEN_PREFIX + this.issued);
  }
  refused(token: string): Promise<boolean> {
    this.invalidated.push(token);
    if (token === TOKEN_PREFIX + this.issued) this.issued++;
    return Promise.resolve(true);
  }
  secrets(): string[] {
    return [TOKEN_PREFIX + this.issued];
  }
}

function fakeGcs(handler: FakeHandler, options: Partial<GcsStoreOptions> = {}) {
  const tokens = new CountingTokens();
  const { fetch, seen } = recordingFetch(handler);
  const store = new GcsStore({
    bucket: "tier",
    endpoint: "http://gcs.test",
    tokens,
    fetch,
    ...options,
  });
  return { store, seen, tokens };
}

const gcsError = (status: number, reason: string, message = reason) =>
  Response.json({
    error: { code: status, message, errors: [{ domain: "global", reason, message }] },
  }, { status });

const object = (name: string, extra: Record<string, unknown> = {}) =>
  Response.json({
    kind: "storage#object",
    name,
    bucket: "tier",
    generation: "1001",
    size: "3",
    etag: "E1",
    ...extra,
  });

const rejectsWith = rejectsWithCode(assertNoTokens);

function assertNoTokens(value: unknown): void {
  assertNoLeak(value, [[TOKEN_PREFIX, "a bearer token"]]);
}

Deno.test("gcs faults: requests carry the bearer token; none without one", async () => {
  const { store, seen } = fakeGcs(() => object("k"));
  assert.deepEqual(await store.put("k", new Uint8Array(3)), {
    status: "Created",
    etag: "E1",
    version: "1001",
  });
  assert.equal(seen[0].headers["authorization"], `Bearer ${TOKEN_PREFIX}1`);
  // With its CRC-32C in the resource: a multipart/related body of the exact length sent.
  assert.equal(seen[0].headers["content-length"], String(seen[0].body?.byteLength));
  const crc = (await checksumOf("crc32c", new Uint8Array(3))).value;
  assert.ok(new TextDecoder().decode(seen[0].body).includes(`"crc32c":"${crc}"`));
  const anonymous = fakeGcs(() => object("k"), { tokens: new NoTokenSource() });
  await anonymous.store.head("k");
  assert.equal(anonymous.seen[0].headers["authorization"], undefined);
});

Deno.test("gcs faults: a 401 refreshes the token once out of band; a second 401 is Auth", async () => {
  const once = fakeGcs((request) =>
    request.headers["authorization"] === `Bearer ${TOKEN_PREFIX}1`
      ? gcsError(401, "authError", "Invalid Credentials")
      : object("k")
  );
  await once.store.head("k");
  assert.deepEqual(once.tokens.invalidated, [`${TOKEN_PREFIX}1`]);
  assert.equal(once.seen[1].headers["authorization"], `Bearer ${TOKEN_PREFIX}2`);

  const always = fakeGcs(() => gcsError(401, "authError", "Invalid Credentials"));
  const err = await rejectsWith(always.store.list("p/"), "Auth", "authError");
  assert.equal(always.seen.length, 2, "one retry, not a loop");
  assert.match(err.message, /test tokens was not accepted/);
});

Deno.test("gcs faults: a replacement names its generation; 412 and 404 are PreconditionFailed", async () => {
  const ok = fakeGcs(() => object("k", { generation: "1002" }));
  assert.deepEqual(await ok.store.put("k", new Uint8Array(1), { ifMatch: "1001" }), {
    status: "Created",
    etag: "E1",
    version: "1002",
  });
  assert.match(ok.seen[0].url, /[?&]ifGenerationMatch=1001(&|$)/);
  const stale = fakeGcs(() => gcsError(412, "conditionNotMet", "Precondition failed"));
  await rejectsWith(
    stale.store.put("k", new Uint8Array(1), { ifMatch: "1001" }),
    "PreconditionFailed",
    "conditionNotMet",
  );
  const absent = fakeGcs(() => gcsError(404, "notFound", "No such object: tier/k"));
  await rejectsWith(
    absent.store.put("k", new Uint8Array(1), { ifMatch: "1001" }),
    "PreconditionFailed",
    "notFound",
  );
  // Not a generation (another store's version, `0`): no object has it, nothing is sent.
  for (const version of ["0", '"0x1"', "e1f2"]) {
    await rejectsWith(
      ok.store.put("k", new Uint8Array(1), { ifMatch: version }),
      "PreconditionFailed",
      "conditionNotMet",
    );
  }
  await assert.rejects(
    ok.store.put("k", new Uint8Array(1), { ifAbsent: true, ifMatch: "1001" }),
    RangeError,
  );
  assert.equal(ok.seen.length, 1);
  // A media download's x-goog-generation is the version a GET reports.
  const read = fakeGcs(() =>
    new Response(new Uint8Array(3), { headers: { "x-goog-generation": "1001" } })
  );
  assert.equal((await read.store.get("k")).version, "1001");
});

Deno.test("gcs faults: ifGenerationMatch=0 on an existing object is AlreadyExists (put and compose)", async () => {
  const put = fakeGcs(() =>
    gcsError(
      412,
      "conditionNotMet",
      "At least one of the pre-conditions you specified did not hold.",
    )
  );
  assert.deepEqual(await put.store.put("k", new Uint8Array(1), { ifAbsent: true }), {
    status: "AlreadyExists",
  });
  assert.match(put.seen[0].url, /ifGenerationMatch=0/);
  await rejectsWith(put.store.put("k", new Uint8Array(1)), "PreconditionFailed", "conditionNotMet");

  // Completing with ifAbsent on real GCS: list the staged parts, compose with the precondition,
  // 412 → AlreadyExists, and no HEAD first (conditionalCompose "precondition").
  const uploadId = "0123456789abcdef0123456789abcdef";
  const marker = `.tierd-multipart/k/${uploadId}`;
  const compose = fakeGcs((request) => {
    if (request.url.includes("/compose")) return gcsError(412, "conditionNotMet");
    return Response.json({
      items: [
        {
          name: marker,
          generation: "1",
          size: "0",
          metadata: { owner: "me" },
          contentType: "application/x-iggy",
        },
        { name: `${marker}/part-00001`, generation: "11", size: "5" },
        { name: `${marker}/part-00002`, generation: "12", size: "5" },
      ],
    });
  });
  const parts = [{ partNumber: 2, etag: "12" }, { partNumber: 1, etag: "11" }];
  assert.deepEqual(
    await compose.store.completeMultipart("k", uploadId, parts, { ifAbsent: true }),
    { status: "AlreadyExists" },
  );
  assert.deepEqual(compose.seen.map((r) => r.method), ["GET", "POST"]);
  const body = JSON.parse(new TextDecoder().decode(compose.seen[1].body));
  assert.deepEqual(body.sourceObjects, [
    { name: `${marker}/part-00001`, generation: "11" },
    { name: `${marker}/part-00002`, generation: "12" },
  ]);
  assert.deepEqual(body.destination, {
    contentType: "application/x-iggy",
    metadata: { owner: "me" },
  });
  assert.match(compose.seen[1].url, /\/o\/k\/compose\?ifGenerationMatch=0$/);
  // A part uploaded again has a new generation: the old etag is refused.
  await rejectsWith(
    compose.store.completeMultipart("k", uploadId, [{ partNumber: 1, etag: "10" }]),
    "PreconditionFailed",
    "InvalidPart",
  );
  await rejectsWith(
    compose.store.completeMultipart("k", uploadId, [{ partNumber: 3, etag: "13" }]),
    "PreconditionFailed",
    "InvalidPart",
  );
  await rejectsWith(
    compose.store.completeMultipart("k", "f".repeat(32), parts),
    "NotFound",
    "NoSuchUpload",
  );
});

Deno.test("gcs faults: throttling, server errors, auth and resets map to typed errors", async () => {
  const cases: Array<[() => Response | Promise<Response>, StoreErrorKind, string]> = [
    [() => gcsError(429, "rateLimitExceeded"), "Throttled", "rateLimitExceeded"],
    [() => gcsError(503, "backendError"), "Throttled", "backendError"],
    [() => new Response("", { status: 503 }), "Throttled", "backendError"],
    [() => gcsError(500, "internalError"), "Transport", "internalError"],
    [() => new Response("<html>Bad Gateway</html>", { status: 502 }), "Transport", "badGateway"],
    [
      () => gcsError(403, "forbidden", "tierd@p does not have storage.objects.list access"),
      "Auth",
      "forbidden",
    ],
    [
      () => gcsError(404, "notFound", "The specified bucket does not exist."),
      "NotFound",
      "notFound",
    ],
  ];
  for (const [answer, kind, code] of cases) {
    const { store } = fakeGcs(answer);
    const err = await rejectsWith(store.list("p/"), kind, code);
    if (code === "notFound") {
      assert.match(err.message, /bucket 'tier' does not exist at http:\/\/gcs\.test/);
    }
    if (code === "forbidden") {
      assert.match(err.message, /lacks permission for list on bucket 'tier'/);
    }
  }
  const reset = fakeGcs(() => Promise.reject(new TypeError("connection reset by peer"))).store;
  await rejectsWith(reset.get("k"), "Transport");
  const truncated =
    fakeGcs(() => new Response("abc", { headers: { "content-length": "10" } })).store;
  await rejectsWith(truncated.get("k"), "Transport");
  const html = fakeGcs(() => new Response("<html>captive portal</html>")).store;
  await rejectsWith(html.list("p/"), "Malformed");
  await rejectsWith(html.head("k"), "Malformed");
});

Deno.test("gcs faults: missing objects and ranges", async () => {
  const blob = new TextEncoder().encode("0123456789");
  const { store, seen } = fakeGcs((request) => {
    if (request.url.includes("/missing")) return new Response("Not Found", { status: 404 });
    const range = /bytes=(\d+)-(\d+)/.exec(request.headers["range"] ?? "");
    if (!range) return new Response(blob);
    const start = Number(range[1]);
    if (start >= blob.length) {
      return new Response(
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidRange</Code></Error>",
        { status: 416 },
      );
    }
    const end = Math.min(Number(range[2]), blob.length - 1);
    return new Response(blob.slice(start, end + 1), {
      status: 206,
      headers: { "content-range": `bytes ${start}-${end}/10` },
    });
  });
  const got = await store.get("k", { range: { start: 7, length: 100 } });
  assert.deepEqual([new TextDecoder().decode(got.bytes), got.size], ["789", 10]);
  assert.match(seen[0].url, /\/o\/k\?alt=media$/);
  await rejectsWith(
    store.get("k", { range: { start: 10, length: 1 } }),
    "InvalidRange",
    "InvalidRange",
  );
  await rejectsWith(store.get("missing"), "NotFound", "notFound");
  await rejectsWith(store.head("missing"), "NotFound", "notFound");
});

Deno.test("gcs faults: a bearer token echoed by a server or named by a network error never shows", async () => {
  const echo =
    fakeGcs((request) => gcsError(400, "invalid", `bad header ${request.headers["authorization"]}`))
      .store;
  await rejectsWith(echo.put("k", new Uint8Array(1)), "Unsupported", "invalid");
  const failing =
    fakeGcs((request) =>
      Promise.reject(new TypeError(`failed with ${request.headers["authorization"]}`))
    ).store;
  const err = await rejectsWith(failing.list(""), "Transport");
  let cause: unknown = err.cause;
  while (cause instanceof Error) {
    assert.ok(!cause.message.includes(TOKEN_PREFIX), "the cause chain leaked the token");
    cause = cause.cause;
  }
  assertNoTokens(echo);
  assertNoTokens(JSON.stringify(echo));
});

Deno.test("gcs faults: deleteMany treats 404 as done, keeps refused keys, stops on throttling", async () => {
  const { store, seen } = fakeGcs((request) =>
    request.url.endsWith("/gone")
      ? gcsError(404, "notFound")
      : request.url.endsWith("/held")
      ? gcsError(412, "conditionNotMet", "object is under retention")
      : new Response(null, { status: 204 })
  );
  const failures = await store.deleteMany(["a", "gone", "held", "a", ".."]);
  assert.deepEqual(failures.map((f) => [f.key, f.error.detail.code]).sort(), [
    ["..", "InvalidKey"],
    ["held", "conditionNotMet"],
  ]);
  assert.equal(seen.length, 3);
  const busy = fakeGcs(() => gcsError(429, "rateLimitExceeded")).store;
  await rejectsWith(busy.deleteMany(["a", "b", "c"]), "Throttled");
});

Deno.test("gcs faults: names GCS cannot hold are refused before any request", async () => {
  const { store, seen } = fakeGcs(() => object("k"));
  for (const key of ["", ".", "..", "a\nb", "a\rb", "x".repeat(1025)]) {
    await rejectsWith(store.put(key, new Uint8Array(1)), "Unsupported", "InvalidKey");
  }
  // Deep keys are fine for a put, but too long for the staged part names of a multipart upload.
  await rejectsWith(store.createMultipart("y".repeat(1000)), "Unsupported", "InvalidKey");
  assert.equal(seen.length, 0);
});

Deno.test("gcs faults: a nextPageToken that loops ends a listing with ListingLoop", async () => {
  // Past 50 requests a 500: a listing that never ends fails the test instead of hanging it.
  const looping = (_request: unknown, n: number) =>
    n > 50 ? gcsError(500, "backendError") : Response.json({
      items: [{ name: `.tierd-multipart/p/k/${n}`, generation: "1", size: "0" }],
      nextPageToken: "again",
    });
  const { store, seen } = fakeGcs(looping);
  const err = await rejectsWith(store.listMultipartUploads("p/"), "Malformed", "ListingLoop");
  assert.ok(
    err.message.startsWith(
      `gcs ${store.endpoint} bucket 'tier': listMultipartUploads of prefix ".tierd-multipart/p/" ` +
        "stopped after 2 pages",
    ),
    err.message,
  );
  assert.equal(seen.length, 2);
  assert.equal(new URL(seen[1].url).searchParams.get("pageToken"), "again");

  const listed = fakeGcs(looping);
  await rejectsWith(listBounded(listed.store, "p/"), "Malformed", "ListingLoop");
  assert.equal(listed.seen.length, 2);
});
