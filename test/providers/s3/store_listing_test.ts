// S3Store's listings against a tiny fake S3 server on a loopback port: continuation tokens and
// ListMultipartUploads markers that loop or go back end in the named error after a bounded
// number of requests, while AWS's order (one key's uploads across pages, by initiation) and
// MinIO's (every upload of the bucket, by initiation) still list.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { listBounded } from "../../../providers/listing.ts";
import { S3Store } from "../../../providers/s3/store.ts";
import { rejectsWith } from "../_faults.ts";

/** What the fake server answers: an XML body, and headers. */
interface FakeAnswer {
  xml: string;
  headers?: Record<string, string>;
}

/** Requests the fake server answers; past them a 500, so a listing that never ends fails. */
const BUDGET = 50;

/** A fake S3 server answering every request from `answer` (n counts requests, from 1). */
async function startFakeS3(answer: (query: URLSearchParams, n: number) => FakeAnswer) {
  const queries: URLSearchParams[] = [];
  const server = http.createServer((req, res) => {
    const query = new URL(req.url ?? "/", "http://fake").searchParams;
    queries.push(query);
    if (queries.length > BUDGET) {
      res.writeHead(500, { "content-type": "application/xml" });
      res.end("<Error><Code>InternalError</Code><Message>past the budget</Message></Error>");
      return;
    }
    const { xml, headers = {} } = answer(query, queries.length);
    const body = `<?xml version="1.0" encoding="UTF-8"?>${xml}`;
    res.writeHead(200, { "content-type": "application/xml", ...headers });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const store = new S3Store({
    endpoint,
    region: "us-east-1",
    bucket: "b",
    credentials: "none",
    urlStyle: "path",
  });
  return {
    store,
    queries,
    describe: `s3 ${endpoint} bucket 'b'`,
    [Symbol.asyncDispose]: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const objects = (keys: string[], next?: string) => ({
  xml: `<ListBucketResult><Name>b</Name>${
    keys.map((k) => `<Contents><Key>${k}</Key><Size>1</Size></Contents>`).join("")
  }<IsTruncated>${next !== undefined}</IsTruncated>${
    next === undefined ? "" : `<NextContinuationToken>${next}</NextContinuationToken>`
  }</ListBucketResult>`,
});

const uploads = (
  list: Array<[key: string, id: string]>,
  next?: [key: string, id: string],
  headers?: Record<string, string>,
) => ({
  xml: `<ListMultipartUploadsResult><Bucket>b</Bucket>${
    list.map(([key, id]) => `<Upload><Key>${key}</Key><UploadId>${id}</UploadId></Upload>`)
      .join("")
  }<IsTruncated>${next !== undefined}</IsTruncated>${
    next === undefined
      ? ""
      : `<NextKeyMarker>${next[0]}</NextKeyMarker><NextUploadIdMarker>${
        next[1]
      }</NextUploadIdMarker>`
  }</ListMultipartUploadsResult>`,
  headers,
});

Deno.test("s3 listing: a ListObjectsV2 continuation token that loops is ListingLoop", async () => {
  await using s3 = await startFakeS3((_query, n) => objects([`p/${n}`], "loop"));
  const err = await rejectsWith(
    listBounded(s3.store, "p/", { describe: s3.describe }),
    "Malformed",
    (e) => assert.equal(e.detail.code, "ListingLoop"),
  );
  assert.ok(err.message.startsWith(`${s3.describe}: list of prefix "p/" stopped after 2 pages`));
  assert.equal(s3.queries.length, 2);
  assert.equal(s3.queries[1].get("continuation-token"), "loop");
});

Deno.test("s3 listing: fresh tokens over the same keys are ListingNotAdvancing", async () => {
  await using s3 = await startFakeS3((_query, n) => objects(["p/a", "p/b"], `token-${n}`));
  await rejectsWith(
    listBounded(s3.store, "p/", { describe: s3.describe }),
    "Malformed",
    (e) => assert.equal(e.detail.code, "ListingNotAdvancing"),
  );
  assert.equal(s3.queries.length, 2);
});

Deno.test("s3 listing: ListMultipartUploads markers that loop are ListingLoop", async () => {
  await using s3 = await startFakeS3(() => uploads([["p/a", "u1"]], ["p/a", "u1"]));
  const err = await rejectsWith(
    s3.store.listMultipartUploads("p/"),
    "Malformed",
    (e) => assert.equal(e.detail.code, "ListingLoop"),
  );
  assert.ok(
    err.message.startsWith(
      `${s3.describe}: listMultipartUploads of prefix "p/" stopped after 2 pages`,
    ),
    err.message,
  );
  assert.equal(s3.queries.length, 2);
  assert.equal(s3.queries[1].get("key-marker"), "p/a");
  assert.equal(s3.queries[1].get("upload-id-marker"), "u1");
});

Deno.test("s3 listing: ListMultipartUploads markers that go back are ListingNotAdvancing", async () => {
  await using s3 = await startFakeS3((_query, n) =>
    uploads([["p/b", `u${n}`]], n % 2 ? ["p/b", `u${n}`] : ["p/a", `u${n}`])
  );
  await rejectsWith(
    s3.store.listMultipartUploads("p/"),
    "Malformed",
    (e) => assert.match(e.message, /marker "p\/a" does not sort after "p\/b"/),
  );
  assert.equal(s3.queries.length, 2);
});

Deno.test("s3 listing: one key's uploads across pages by initiation, and MinIO's order, still list", async () => {
  // AWS: by key, then by initiation: upload ids in no order, one key across pages.
  {
    await using s3 = await startFakeS3((_query, n) =>
      [
        uploads([["p/a", "z9"], ["p/a", "c3"]], ["p/a", "c3"]),
        uploads([["p/a", "m1"], ["p/b", "a0"]], ["p/b", "a0"]),
        uploads([["p/c", "b7"]]),
      ][n - 1]
    );
    const listed = await s3.store.listMultipartUploads("p/");
    assert.deepEqual(listed.map((u) => `${u.key} ${u.uploadId}`), [
      "p/a z9",
      "p/a c3",
      "p/a m1",
      "p/b a0",
      "p/c b7",
    ]);
  }
  // MinIO, asked without a prefix: every upload of the bucket, by initiation, in one page.
  {
    const minio = { server: "MinIO" };
    await using s3 = await startFakeS3(() =>
      uploads([["q/z", "1"], ["p/b", "2"], ["p/a", "3"]], undefined, minio)
    );
    const listed = await s3.store.listMultipartUploads("p/");
    assert.deepEqual(listed.map((u) => u.key), ["p/b", "p/a"]);
    assert.equal(s3.queries.at(-1)?.get("prefix") ?? "", "", "listed without the prefix");
  }
});
