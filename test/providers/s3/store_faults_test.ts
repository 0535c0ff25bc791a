// S3Store over an injected fetch: how it behaves when the network or the server misbehaves —
// throttling, resets mid-body, short bodies, auth failures, clock skew, conflicts, timeouts —
// and that no error ever carries the secret or the session token.
import assert from "node:assert/strict";
import { checksumOf } from "../../../providers/checksum.ts";
import { createHash } from "node:crypto";
import { S3Store, type S3StoreOptions } from "../../../providers/s3/store.ts";
import type { FetchFn } from "../../../providers/http.ts";
import { classify, StoreError } from "../../../providers/types.ts";
import {
  assertNoLeak,
  type FakeHandler,
  recordingFetch,
  rejectsWith,
  type SeenRequest,
} from "../_faults.ts";
import { FakeClock } from "../../_fake_clock.ts";

const SECRET = "SeCrEt/Key+Value0123456789abcdefEXAMPLE";
const TOKEN = "FwoGZXIvYXdzSESSIONTOKENexample0123456789";
const NOW = new Date("2026-03-01T12:00:00Z");

// Load the CRC-64/NVME hasher a put computes first: its WebAssembly compiles over real
// macrotasks, which a FakeClock run with no timer pending would spend jumping to Infinity.
await checksumOf("crc64nvme", new Uint8Array(0));

function fakeS3(handler: FakeHandler, options: Partial<S3StoreOptions> = {}) {
  const { fetch, seen } = recordingFetch(handler);
  const store = new S3Store({
    endpoint: "http://s3.test:9000",
    region: "us-east-1",
    bucket: "bucket",
    credentials: { accessKeyId: "AKIDTEST", secretAccessKey: SECRET, sessionToken: TOKEN },
    urlStyle: "path",
    fetch,
    clock: new FakeClock(NOW.getTime()),
    ...options,
  });
  return { store, seen };
}

const xml = (body: string, status: number, headers: Record<string, string> = {}) =>
  new Response(`<?xml version="1.0" encoding="UTF-8"?>${body}`, {
    status,
    headers: { "content-type": "application/xml", ...headers },
  });
const s3ErrorBody = (code: string, message = code) =>
  `<Error><Code>${code}</Code><Message>${message}</Message><RequestId>R</RequestId></Error>`;

function assertNoSecrets(value: unknown): void {
  assertNoLeak(value, [[SECRET, "the secret"], [TOKEN, "the session token"]]);
}

Deno.test("s3 faults: 503 SlowDown is Throttled, 429 too, 500 is Transport", async () => {
  const { store, seen } = fakeS3(() =>
    xml(s3ErrorBody("SlowDown", "Please reduce your request rate."), 503)
  );
  const err = await rejectsWith(store.get("k"), "Throttled", (e) => {
    assert.equal(e.detail.code, "SlowDown");
    assert.equal(e.detail.status, 503);
    assert.equal(e.detail.op, "get");
    assert.equal(e.detail.key, "k");
  });
  assert.equal(classify(err), "retry");
  assert.equal(seen.length, 1, "retries belong to the retry layer, not the store");
  await rejectsWith(fakeS3(() => new Response("", { status: 429 })).store.head("k"), "Throttled");
  await rejectsWith(
    fakeS3(() => xml(s3ErrorBody("InternalError"), 500)).store.list("p"),
    "Transport",
  );
});

Deno.test("s3 faults: a connection reset mid-body is Transport", async () => {
  const { store } = fakeS3(() => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(10));
        controller.error(new TypeError("connection reset by peer"));
      },
    });
    return new Response(body, { status: 200, headers: { "content-length": "1000" } });
  });
  await rejectsWith(store.get("k"), "Transport", (e) => {
    assert.match(e.message, /connection lost while reading the 200 response body/);
    assert.match(e.message, /connection reset by peer/);
  });
});

Deno.test("s3 faults: a body shorter than its Content-Length is Transport", async () => {
  const { store } = fakeS3(() =>
    new Response(new Uint8Array(10), { status: 200, headers: { "content-length": "1000" } })
  );
  await rejectsWith(store.get("k"), "Transport", (e) => {
    assert.match(e.message, /truncated body: got 10 of 1000 bytes/);
  });
});

Deno.test("s3 faults: connection refused and DNS failures are Transport", async () => {
  const { store } = fakeS3(() => {
    throw new TypeError("error sending request", {
      cause: new Error("tcp connect error: Connection refused (os error 111)"),
    });
  });
  await rejectsWith(store.put("k", new Uint8Array(1)), "Transport", (e) => {
    assert.match(e.message, /Connection refused/);
    assert.equal(e.detail.op, "put");
    assert.equal(e.detail.status, undefined);
  });
});

Deno.test("s3 faults: 401 and 403 are Auth, with or without a body", async () => {
  await rejectsWith(fakeS3(() => new Response(null, { status: 401 })).store.list(""), "Auth");
  await rejectsWith(
    fakeS3(() => xml(s3ErrorBody("AccessDenied", "Access Denied"), 403)).store.get("k"),
    "Auth",
    (e) => assert.equal(e.detail.code, "AccessDenied"),
  );
  const { store } = fakeS3(() => new Response(null, { status: 403 }));
  const err = await rejectsWith(store.head("k"), "Auth");
  assert.equal(classify(err), "auth");
});

Deno.test("s3 faults: HEAD 404 without a body is NotFound", async () => {
  const { store, seen } = fakeS3(() => new Response(null, { status: 404 }));
  const err = await rejectsWith(store.head("missing"), "NotFound");
  assert.equal(err.detail.status, 404);
  assert.equal(seen[0].method, "HEAD");
  assert.equal(classify(err), "not_found");
});

Deno.test("s3 faults: RequestTimeTooSkewed is answered by one re-sign on the server's clock", async () => {
  const serverNow = new Date(NOW.getTime() + 3600_000);
  const { store, seen } = fakeS3((_req, n) =>
    n === 1
      ? xml(s3ErrorBody("RequestTimeTooSkewed"), 403, { date: serverNow.toUTCString() })
      : xml("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", 200)
  );
  assert.deepEqual(await store.list("p"), { objects: [] });
  assert.equal(seen.length, 2);
  assert.equal(seen[0].headers["x-amz-date"], "20260301T120000Z");
  assert.equal(seen[1].headers["x-amz-date"], "20260301T130000Z", "signed on the server's clock");
  assert.equal(store.clockOffsetMs, 3600_000);
  await store.list("p");
  assert.equal(seen[2].headers["x-amz-date"], "20260301T130000Z", "the offset is kept");
});

Deno.test("s3 faults: a second skew answer is not re-signed again", async () => {
  const { store, seen } = fakeS3(() =>
    xml(s3ErrorBody("RequestTimeTooSkewed"), 403, {
      date: new Date(NOW.getTime() - 7200_000).toUTCString(),
    })
  );
  await rejectsWith(
    store.list("p"),
    "Auth",
    (e) => assert.equal(e.detail.code, "RequestTimeTooSkewed"),
  );
  assert.equal(seen.length, 2, "exactly one re-sign");
});

Deno.test("s3 faults: a bodiless HEAD 403 from a far-off server clock is taken as skew", async () => {
  const serverNow = new Date(NOW.getTime() + 20 * 60_000);
  const { store, seen } = fakeS3((_req, n) =>
    n === 1
      ? new Response(null, { status: 403, headers: { date: serverNow.toUTCString() } })
      : new Response(null, { status: 200, headers: { "content-length": "5" } })
  );
  assert.equal((await store.head("k")).size, 5);
  assert.equal(seen.length, 2);
  assert.equal(store.clockOffsetMs, 20 * 60_000);
});

Deno.test("s3 faults: 409 ConditionalRequestConflict is retried, then 412 means AlreadyExists", async () => {
  const clock = new FakeClock(NOW.getTime());
  const { store, seen } = fakeS3(
    (_req, n) =>
      n <= 2
        ? xml(s3ErrorBody("ConditionalRequestConflict"), 409)
        : xml(s3ErrorBody("PreconditionFailed"), 412),
    { clock },
  );
  const run = <T>(p: Promise<T>) => clock.runUntil(p, { maxStepMs: Infinity });
  const started = clock.now();
  assert.deepEqual(await run(store.put("k", new Uint8Array(1), { ifAbsent: true })), {
    status: "AlreadyExists",
  });
  assert.equal(seen.length, 3);
  assert.ok(clock.now() > started, "it backed off (on the clock) between the attempts");
  assert.ok(seen.every((r) => r.headers["if-none-match"] === "*"));
  const stuck = fakeS3(() => xml(s3ErrorBody("ConditionalRequestConflict"), 409), { clock });
  await rejectsWith(run(stuck.store.put("k", new Uint8Array(1), { ifAbsent: true })), "Transport");
  assert.equal(stuck.seen.length, 4, "three retries, then the error goes to the retry layer");
});

Deno.test("s3 faults: If-Match — 412 and 404 NoSuchKey are PreconditionFailed, 409 is retried first", async () => {
  const clock = new FakeClock(NOW.getTime());
  const run = <T>(p: Promise<T>) => clock.runUntil(p, { maxStepMs: Infinity });
  const replace = (answer: () => Response) => {
    const fake = fakeS3(answer, { clock });
    const put = fake.store.put("owner", new Uint8Array(1), { ifMatch: "e1" });
    return { put: run(put), seen: fake.seen };
  };
  const ok = replace(() => new Response(null, { status: 200, headers: { etag: '"e2"' } }));
  assert.deepEqual(await ok.put, { status: "Created", etag: "e2", version: "e2" });
  assert.equal(ok.seen[0].headers["if-match"], '"e1"');
  assert.equal(ok.seen[0].headers["if-none-match"], undefined);
  const stale = replace(() => xml(s3ErrorBody("PreconditionFailed"), 412));
  await rejectsWith(stale.put, "PreconditionFailed", (e) => assert.equal(e.detail.status, 412));
  const absent = replace(() => xml(s3ErrorBody("NoSuchKey"), 404));
  await rejectsWith(
    absent.put,
    "PreconditionFailed",
    (e) => assert.equal(e.detail.code, "NoSuchKey"),
  );
  const noBucket = replace(() => xml(s3ErrorBody("NoSuchBucket"), 404));
  await rejectsWith(noBucket.put, "NotFound");
  // A concurrent conditional write: retried here, and the retry learns the other write won.
  const conflict = fakeS3(
    (_req, n) =>
      n === 1
        ? xml(s3ErrorBody("ConditionalRequestConflict"), 409)
        : xml(s3ErrorBody("PreconditionFailed"), 412),
    { clock },
  );
  await rejectsWith(
    run(conflict.store.put("owner", new Uint8Array(1), { ifMatch: "e1" })),
    "PreconditionFailed",
  );
  assert.equal(conflict.seen.length, 2);
  // Both conditions at once: refused before anything is sent.
  const both = fakeS3(() => new Response(null, { status: 200 }));
  await assert.rejects(
    both.store.put("owner", new Uint8Array(1), { ifAbsent: true, ifMatch: "e1" }),
    RangeError,
  );
  assert.equal(both.seen.length, 0);
});

Deno.test("s3 faults: ranged GET — 206, a 200 for the whole object, 416", async () => {
  const object = new TextEncoder().encode("0123456789");
  const partial = fakeS3((req) => {
    assert.equal(req.headers.range, "bytes=2-4");
    return new Response(object.slice(2, 5), {
      status: 206,
      headers: { "content-range": "bytes 2-4/10", etag: '"e"' },
    });
  });
  const got = await partial.store.get("k", { range: { start: 2, length: 3 } });
  assert.deepEqual([new TextDecoder().decode(got.bytes), got.size, got.etag], ["234", 10, "e"]);
  const whole = fakeS3(() => new Response(object, { status: 200 }));
  const cut = await whole.store.get("k", { range: { start: 8, length: 5 } });
  assert.deepEqual([new TextDecoder().decode(cut.bytes), cut.size], ["89", 10]);
  await rejectsWith(whole.store.get("k", { range: { start: 10, length: 1 } }), "InvalidRange");
  await rejectsWith(
    fakeS3(() => xml(s3ErrorBody("InvalidRange"), 416)).store.get("k", {
      range: { start: 99, length: 1 },
    }),
    "InvalidRange",
  );
  await rejectsWith(whole.store.get("k", { range: { start: 0, length: 0 } }), "InvalidRange");
  assert.equal(whole.seen.length, 2, "an empty range is refused before sending");
});

Deno.test("s3 faults: a request past its timeout is Transport; the caller's abort stays an abort", async () => {
  // A fetch that never answers. A real one holds a socket, which keeps the event loop alive
  // while the (unref'd) request timeout runs; this one holds a timer instead.
  const hang: FetchFn = (_url, init) =>
    new Promise((_resolve, reject) => {
      const socket = setInterval(() => {}, 1000);
      init.signal?.addEventListener("abort", () => {
        clearInterval(socket);
        reject(init.signal?.reason);
      }, { once: true });
    });
  const timed = new S3Store({
    endpoint: "http://s3.test:9000",
    region: "us-east-1",
    bucket: "bucket",
    credentials: { accessKeyId: "AKIDTEST", secretAccessKey: SECRET },
    urlStyle: "path",
    fetch: hang,
    requestTimeoutMs: 30,
  });
  await rejectsWith(
    timed.get("k"),
    "Transport",
    (e) => assert.match(e.message, /timed out after 30 ms/),
  );
  const controller = new AbortController();
  const aborted = timed.get("k", { signal: controller.signal });
  controller.abort();
  await assert.rejects(aborted, (err: unknown) => {
    assert.ok(err instanceof DOMException && err.name === "AbortError");
    assert.equal(classify(err), "fail");
    return true;
  });
});

Deno.test("s3 faults: what is sent — signed headers, bare bodies with Content-Length", async () => {
  const { store, seen } = fakeS3(() =>
    new Response(null, { status: 200, headers: { etag: '"abc"' } })
  );
  const body = new Uint8Array([1, 2, 3]);
  assert.deepEqual(await store.put("dir/a b+c.log", body, { metadata: { "end-offset": "9" } }), {
    status: "Created",
    etag: "abc",
    version: "abc",
  });
  const [put] = seen;
  assert.equal(put.url, "http://s3.test:9000/bucket/dir/a%20b%2Bc.log");
  assert.equal(put.headers["x-amz-content-sha256"], "UNSIGNED-PAYLOAD");
  assert.equal(put.headers["x-amz-security-token"], TOKEN);
  assert.equal(put.headers["content-length"], "3");
  assert.equal(put.headers["x-amz-meta-end-offset"], "9");
  // The body's CRC-64/NVME, for S3 to verify on ingest and keep.
  assert.equal(
    put.headers["x-amz-checksum-crc64nvme"],
    (await checksumOf("crc64nvme", body)).value,
  );
  assert.ok(put.body instanceof Uint8Array, "never a ReadableStream");
  assert.match(
    put.headers.authorization,
    /SignedHeaders=host;x-amz-checksum-crc64nvme;x-amz-content-sha256;x-amz-date;x-amz-meta-end-offset;x-amz-security-token,/,
  );
});

Deno.test("s3 faults: DeleteObjects in batches of 1000 with Content-MD5; XML-unsafe keys one by one", async () => {
  const { store, seen } = fakeS3((req) => {
    if (req.method === "DELETE") return new Response(null, { status: 204 });
    const sent = new TextDecoder().decode(req.body);
    const error = (key: string, code: string) =>
      sent.includes(`<Key>${key}</Key>`)
        ? `<Error><Key>${key}</Key><Code>${code}</Code><Message>no</Message></Error>`
        : "";
    return xml(
      `<DeleteResult>${error("k-1500", "AccessDenied")}${error("k-7", "NoSuchKey")}</DeleteResult>`,
      200,
    );
  });
  const keys = Array.from({ length: 2500 }, (_, i) => `k-${i}`);
  const failures = await store.deleteMany([...keys, "ctl\u0001key", "k-1"]);
  assert.deepEqual(failures.map((f) => [f.key, f.error.kind]), [["k-1500", "Auth"]]);
  const posts = seen.filter((r) => r.method === "POST");
  assert.equal(posts.length, 3);
  for (const post of posts) {
    assert.match(post.url, /\/bucket\?delete=$/);
    const md5 = createHash("md5").update(post.body!).digest("base64");
    assert.equal(post.headers["content-md5"], md5);
  }
  const counts = posts.map((p) =>
    (new TextDecoder().decode(p.body).match(/<Object>/g) ?? []).length
  );
  assert.deepEqual(counts, [1000, 1000, 500], "duplicates sent once");
  const single = seen.filter((r) => r.method === "DELETE");
  assert.deepEqual(single.map((r) => r.url), ["http://s3.test:9000/bucket/ctl%01key"]);
});

Deno.test("s3 faults: CompleteMultipartUpload answering 200 with <Error> fails", async () => {
  const { store } = fakeS3(() =>
    xml(s3ErrorBody("InternalError", "We encountered an internal error."), 200)
  );
  await rejectsWith(
    store.completeMultipart("k", "u", [{ partNumber: 1, etag: '"a"' }]),
    "Transport",
    (e) => assert.equal(e.detail.code, "InternalError"),
  );
});

Deno.test("s3 faults: MinIO's exact-key ListMultipartUploads prefix is filtered client-side", async () => {
  const uploads = `<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>` +
    `<Upload><Key>p/a</Key><UploadId>1</UploadId></Upload>` +
    `<Upload><Key>q/b</Key><UploadId>2</UploadId></Upload></ListMultipartUploadsResult>`;
  const { store, seen } = fakeS3((req) =>
    req.url.includes("prefix=")
      ? xml(
        "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>",
        200,
        { server: "MinIO" },
      )
      : xml(uploads, 200, { server: "MinIO" })
  );
  assert.deepEqual((await store.listMultipartUploads("p/")).map((u) => u.key), ["p/a"]);
  assert.equal(seen.length, 2, "learned from the Server header, then listed without the prefix");
  assert.deepEqual((await store.listMultipartUploads("q/")).map((u) => u.key), ["q/b"]);
  assert.equal(seen.length, 3, "straight to the unprefixed listing once known");
});

Deno.test("s3 faults: auto addressing falls back to path style when the bucket host does not resolve", async () => {
  const { store, seen } = fakeS3((req) => {
    if (req.url.startsWith("https://bucket.")) {
      throw new TypeError("dns error: failed to lookup address");
    }
    return xml("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", 200);
  }, { endpoint: undefined, region: "eu-west-1", urlStyle: "auto" });
  assert.equal(store.addressStyle, "virtual");
  await store.probe("iggy/");
  assert.equal(store.addressStyle, "path");
  assert.deepEqual(seen.map((r) => new URL(r.url).host), [
    "bucket.s3.eu-west-1.amazonaws.com",
    "s3.eu-west-1.amazonaws.com",
  ]);
});

Deno.test("s3 faults: the secret and the session token never reach errors or output", async () => {
  // A hostile server (or proxy) echoing everything it was sent, in every kind of answer.
  const echo = (req: SeenRequest) =>
    `${req.headers.authorization} ${req.headers["x-amz-security-token"]} ${SECRET}`;
  const answers: Array<(req: SeenRequest) => Response | never> = [
    (req) => xml(s3ErrorBody("SignatureDoesNotMatch", echo(req)), 403),
    (req) => xml(s3ErrorBody("AccessDenied", echo(req)), 403),
    (req) => new Response(`<html>${echo(req)}</html>`, { status: 502 }),
    (req) =>
      xml(
        `<ListBucketResult><Contents><Key>${
          echo(req)
        }</Key><Size>x</Size></Contents></ListBucketResult>`,
        200,
      ),
    (req) => new Response(`<ListBucketResult>${echo(req)}`, { status: 200 }),
    (req) => {
      throw new TypeError(`connect failed ${echo(req)}`, { cause: new Error(echo(req)) });
    },
  ];
  for (const answer of answers) {
    const { store } = fakeS3(answer);
    const err = await store.list("p").then(() => undefined, (e) => e);
    assert.ok(err instanceof StoreError, String(err));
    assertNoSecrets(err);
  }
  const complete = fakeS3((req) => xml(s3ErrorBody("InternalError", echo(req)), 200));
  assertNoSecrets(
    await complete.store.completeMultipart("k", "u", [{ partNumber: 1, etag: "a" }]).catch((e) =>
      e
    ),
  );
  const del = fakeS3((req) =>
    xml(
      `<DeleteResult><Error><Key>k</Key><Code>AccessDenied</Code><Message>${
        echo(req)
      }</Message></Error></DeleteResult>`,
      200,
    )
  );
  const failures = await del.store.deleteMany(["k"]);
  assert.equal(failures.length, 1);
  assertNoSecrets(failures[0].error);
  const { store } = fakeS3(() => new Response(null, { status: 200 }));
  assertNoSecrets(store);
  assertNoSecrets(JSON.stringify(store));
  assertNoSecrets(
    await store.presignGet("k", 60).then((url) => url.replace(/X-Amz-Security-Token=[^&]+/, "")),
  );
});

Deno.test("s3 faults: conditionalComplete 'head' looks before completing, for stores that ignore If-None-Match", async () => {
  const done = `<CompleteMultipartUploadResult><ETag>"e-1"</ETag></CompleteMultipartUploadResult>`;
  const taken = fakeS3(
    (req) =>
      req.method === "HEAD"
        ? new Response(null, { status: 200, headers: { "content-length": "1" } })
        : xml(done, 200),
    { conditionalComplete: "head" },
  );
  const parts = [{ partNumber: 1, etag: "a" }];
  assert.deepEqual(await taken.store.completeMultipart("k", "u", parts, { ifAbsent: true }), {
    status: "AlreadyExists",
  });
  assert.deepEqual(taken.seen.map((r) => r.method), ["HEAD"]);
  const free = fakeS3(
    (req) => req.method === "HEAD" ? new Response(null, { status: 404 }) : xml(done, 200),
    { conditionalComplete: "head" },
  );
  assert.deepEqual(await free.store.completeMultipart("k", "u", parts, { ifAbsent: true }), {
    status: "Created",
    etag: "e-1",
    version: "e-1",
  });
  assert.deepEqual(free.seen.map((r) => r.method), ["HEAD", "POST"]);
  assert.equal(free.seen[1].headers["if-none-match"], undefined);
});
