// The SigV4 signer, stage by stage against AWS's published S3 examples (examplebucket,
// 20130524), and as a whole against aws4fetch on random keys, headers, queries, regions, dates.
import assert from "node:assert/strict";
import fc from "fast-check";
import { AwsClient } from "aws4fetch";
import {
  amzDate,
  authorizationHeader,
  canonicalHeaders,
  canonicalQueryString,
  canonicalRequest,
  credentialScope,
  EMPTY_SHA256,
  presignGetUrl,
  type QueryParam,
  signature,
  signingKey,
  type SigningKeyEntry,
  signRequest,
  stringToSign,
  uriEncode,
} from "../../../providers/s3/sigv4.ts";

const credentials = {
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};
const HOST = "examplebucket.s3.amazonaws.com";
const NOW = new Date("2013-05-24T00:00:00Z");
const SCOPE = "20130524/us-east-1/s3/aws4_request";

Deno.test("sigv4: AWS example GET Object (Range), every stage", async () => {
  const headers = canonicalHeaders({
    host: HOST,
    range: "bytes=0-9",
    "x-amz-content-sha256": EMPTY_SHA256,
    "x-amz-date": "20130524T000000Z",
  });
  const canonical = canonicalRequest({
    method: "GET",
    canonicalPath: uriEncode("/test.txt", true),
    canonicalQuery: "",
    headers,
    payloadHash: EMPTY_SHA256,
  });
  assert.equal(
    canonical,
    [
      "GET",
      "/test.txt",
      "",
      `host:${HOST}`,
      "range:bytes=0-9",
      `x-amz-content-sha256:${EMPTY_SHA256}`,
      "x-amz-date:20130524T000000Z",
      "",
      "host;range;x-amz-content-sha256;x-amz-date",
      EMPTY_SHA256,
    ].join("\n"),
  );
  const toSign = await stringToSign("20130524T000000Z", SCOPE, canonical);
  assert.equal(
    toSign,
    "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n" +
      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
  );
  const key = await signingKey(credentials, "20130524", "us-east-1", "s3");
  const sig = await signature(key, toSign);
  assert.equal(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  assert.equal(
    authorizationHeader(credentials.accessKeyId, SCOPE, headers.signedHeaders, sig),
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
      "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
  );
});

Deno.test("sigv4: AWS example PUT Object (key with $), canonical request and signature", async () => {
  const signed = await signRequest({
    method: "PUT",
    protocol: "https:",
    host: HOST,
    path: "/test$file.text",
    headers: { date: "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY" },
    payloadHash: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
    credentials,
    region: "us-east-1",
    now: NOW,
  });
  assert.equal(
    signed.canonicalRequest,
    "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\nhost:" + HOST +
      "\nx-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072" +
      "\nx-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n" +
      "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n" +
      "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
  );
  assert.equal(
    signed.stringToSign.split("\n")[3],
    "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
  );
  assert.match(
    signed.headers.authorization,
    /Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd$/,
  );
  assert.equal(signed.url, `https://${HOST}/test%24file.text`, "sends exactly the signed path");
});

Deno.test("sigv4: AWS example GET Bucket Lifecycle (valueless query parameter)", async () => {
  const signed = await signRequest({
    method: "GET",
    protocol: "https:",
    host: HOST,
    path: "/",
    query: [["lifecycle", ""]],
    payloadHash: EMPTY_SHA256,
    credentials,
    region: "us-east-1",
    now: NOW,
  });
  assert.equal(signed.canonicalRequest.split("\n")[2], "lifecycle=");
  assert.equal(
    signed.stringToSign.split("\n")[3],
    "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
  );
  assert.match(
    signed.headers.authorization,
    /Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543$/,
  );
  assert.equal(signed.url, `https://${HOST}/?lifecycle=`);
});

Deno.test("sigv4: AWS example GET Bucket (List Objects), query sorted", async () => {
  const signed = await signRequest({
    method: "GET",
    protocol: "https:",
    host: HOST,
    path: "/",
    query: [["prefix", "J"], ["max-keys", "2"]],
    payloadHash: EMPTY_SHA256,
    credentials,
    region: "us-east-1",
    now: NOW,
  });
  assert.equal(signed.canonicalRequest.split("\n")[2], "max-keys=2&prefix=J");
  assert.match(
    signed.headers.authorization,
    /Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7$/,
  );
});

Deno.test("sigv4: AWS example presigned GET URL", async () => {
  const url = await presignGetUrl({
    protocol: "https:",
    host: HOST,
    path: "/test.txt",
    credentials,
    region: "us-east-1",
    now: NOW,
    expiresSeconds: 86400,
  });
  assert.equal(
    url,
    "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
      "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" +
      "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
      "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
  );
  await assert.rejects(
    presignGetUrl({
      protocol: "https:",
      host: HOST,
      path: "/x",
      credentials,
      region: "us-east-1",
      now: NOW,
      expiresSeconds: 604801,
    }),
    RangeError,
  );
});

Deno.test("sigv4: S3 URI encoding rules", () => {
  assert.equal(
    uriEncode("a b+c=d&e?f#g!h*i'j(k)l$m~n_o-p.q/r", true),
    "a%20b%2Bc%3Dd%26e%3Ff%23g%21h%2Ai%27j%28k%29l%24m~n_o-p.q/r",
  );
  assert.equal(uriEncode("a/b", false), "a%2Fb");
  assert.equal(uriEncode("100%", true), "100%25");
  assert.equal(uriEncode("ключ/😀", true), "%D0%BA%D0%BB%D1%8E%D1%87/%F0%9F%98%80");
  assert.equal(
    canonicalQueryString([["b", "2"], ["a", "x y"], ["a-b", ""], ["a", "+"], ["A", "1"]]),
    "A=1&a=%2B&a=x%20y&a-b=&b=2",
    "sorted by encoded name, then value; empty values as name=",
  );
  assert.equal(amzDate(new Date("2026-01-02T03:04:05.678Z")), "20260102T030405Z");
  assert.equal(
    credentialScope("20260102", "eu-west-1", "s3"),
    "20260102/eu-west-1/s3/aws4_request",
  );
  const folded = canonicalHeaders({ "X-Amz-Meta-A": "  two  spaces\tand tab  " });
  assert.equal(folded.block, "x-amz-meta-a:two spaces and tab\n");
});

Deno.test("sigv4: the signing key is derived once per day/region/service and secret", async () => {
  const cache = new Map<string, SigningKeyEntry>();
  const a = await signingKey(credentials, "20130524", "us-east-1", "s3", cache);
  const b = await signingKey(credentials, "20130524", "us-east-1", "s3", cache);
  assert.equal(a, b, "a cache hit returns the same key");
  assert.equal(cache.size, 1);
  const c = await signingKey(credentials, "20130525", "us-east-1", "s3", cache);
  assert.notEqual(a, c, "a new day is a new key");
  const rotated = await signingKey(
    { ...credentials, secretAccessKey: "rotated" },
    "20130524",
    "us-east-1",
    "s3",
    cache,
  );
  assert.notEqual(a, rotated, "a rotated secret does not hit the old entry");
  const sig = await signature(rotated, "x");
  assert.notEqual(sig, await signature(a, "x"));
});

// ---- differential property against aws4fetch ----

const SPECIALS = [
  " ",
  "+",
  "=",
  "%",
  "&",
  "?",
  "#",
  "!",
  "*",
  "'",
  "(",
  ")",
  "$",
  "~",
  "/",
  "%2B",
  "%20",
  "..a",
  ".",
];
const keyPart = fc.oneof(
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.constantFrom(...SPECIALS),
  fc.string({ unit: "grapheme", maxLength: 4 }),
);
const objectKey = fc.array(keyPart, { minLength: 1, maxLength: 8 })
  .map((parts) => parts.join(""))
  // Dot segments are refused by the store (URL parsing would resolve them before sending).
  .filter((key) => key.length > 0 && !/(^|\/)\.\.?(\/|$)/.test(key));
const printable = fc.string({
  unit: fc.constantFrom(..." \t!\"#$%&'()*+,-./0123456789:;<=>?@ABCXYZ[\\]^_`abcxyz{|}~".split("")),
  maxLength: 24,
});
const metaHeaders = fc.uniqueArray(
  fc.tuple(fc.stringMatching(/^[a-z0-9-]{1,12}$/), printable),
  { selector: ([name]) => name, maxLength: 4 },
).map((pairs) => Object.fromEntries(pairs.map(([n, v]) => [`x-amz-meta-${n}`, v])));
const queryName = fc.oneof(
  fc.constantFrom(
    "prefix",
    "Prefix",
    "prefix ",
    "max-keys",
    "list-type",
    "a",
    "a-b",
    "a~",
    "A",
    "uploads",
    "x+y",
    "x y",
    "k=v",
    "%",
  ),
  fc.string({ unit: "binary", minLength: 1, maxLength: 6 }),
);
const query = fc.uniqueArray(
  fc.tuple(
    queryName,
    fc.oneof(
      fc.constant(""),
      fc.string({ unit: "binary", maxLength: 8 }),
      fc.constantFrom(...SPECIALS),
    ),
  ),
  { selector: ([name]) => name, maxLength: 5 },
).map((pairs) => pairs as QueryParam[]);
const region = fc.oneof(
  fc.constantFrom("us-east-1", "eu-west-1", "ap-southeast-2", "auto", "garage"),
  fc.stringMatching(/^[a-z]{2}-[a-z]{4,9}-[1-9]$/),
);
const date = fc.date({
  min: new Date("2000-01-01T00:00:00Z"),
  max: new Date("2099-12-31T23:59:59Z"),
  noInvalidDate: true,
});
const host = fc.constantFrom(
  "examplebucket.s3.amazonaws.com",
  "s3.eu-west-1.amazonaws.com",
  "127.0.0.1:9000",
  "localhost:9000",
  "minio.internal",
  "[::1]:9000",
);
const extraHeaders = fc.record({
  range: fc.option(fc.nat({ max: 1e9 }).map((n) => `bytes=${n}-${n + 99}`), { nil: undefined }),
  "if-none-match": fc.option(fc.constant("*"), { nil: undefined }),
  "content-md5": fc.option(fc.constant("1B2M2Y8AsgTpgAmY7PhCfg=="), { nil: undefined }),
}, { requiredKeys: [] });

Deno.test("sigv4: Authorization equals aws4fetch's for random requests (numRuns 1000)", async () => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        method: fc.constantFrom("GET", "PUT", "POST", "DELETE", "HEAD"),
        host,
        pathStyle: fc.boolean(),
        key: objectKey,
        meta: metaHeaders,
        extra: extraHeaders,
        query,
        region,
        now: date,
        sessionToken: fc.option(
          fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 40 }).map((t) =>
            t.trim() || "t"
          ),
          { nil: undefined },
        ),
        payloadHash: fc.option(
          fc.constantFrom(
            EMPTY_SHA256,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
          ),
          { nil: undefined },
        ),
        secret: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 40 }),
      }),
      async (r) => {
        runs++;
        const creds = {
          accessKeyId: "AKIDEXAMPLE",
          secretAccessKey: r.secret,
          sessionToken: r.sessionToken,
        };
        const headers: Record<string, string> = { ...r.meta };
        for (const [name, value] of Object.entries(r.extra)) {
          if (value !== undefined) headers[name] = value;
        }
        const path = r.pathStyle ? `/bucket/${r.key}` : `/${r.key}`;
        const ours = await signRequest({
          method: r.method,
          protocol: "http:",
          host: r.host,
          path,
          query: r.query,
          headers,
          credentials: creds,
          region: r.region,
          now: r.now,
          payloadHash: r.payloadHash,
        });
        const client = new AwsClient({ ...creds, service: "s3", region: r.region });
        const theirs = await client.sign(ours.url, {
          method: r.method,
          headers: { ...headers, "x-amz-content-sha256": ours.headers["x-amz-content-sha256"] },
          aws: {
            datetime: r.now.toISOString().replace(/[:-]|\.\d{3}/g, ""),
            allHeaders: true,
          },
        });
        assert.equal(theirs.url, ours.url, "the URL survives WHATWG parsing unchanged");
        assert.equal(ours.headers.authorization, theirs.headers.get("authorization"));
      },
    ),
    { numRuns: 1000 },
  );
  assert.equal(runs >= 1000, true);
});

Deno.test("sigv4: presigned URLs equal aws4fetch's query signing (numRuns 300)", async () => {
  await fc.assert(
    fc.asyncProperty(
      objectKey,
      region,
      date,
      fc.integer({ min: 1, max: 604800 }),
      async (key, reg, now, expires) => {
        const ours = await presignGetUrl({
          protocol: "https:",
          host: "bucket.example.com",
          path: `/${key}`,
          credentials,
          region: reg,
          now,
          expiresSeconds: expires,
        });
        const unsigned = ours.slice(0, ours.indexOf("&X-Amz-Signature="));
        // aws4fetch adds the X-Amz-* parameters itself; give it the URL with only X-Amz-Expires.
        const base = unsigned.slice(0, unsigned.indexOf("?")) + `?X-Amz-Expires=${expires}`;
        const client = new AwsClient({ ...credentials, service: "s3", region: reg });
        const theirs = await client.sign(base, {
          method: "GET",
          aws: { signQuery: true, datetime: now.toISOString().replace(/[:-]|\.\d{3}/g, "") },
        });
        assert.equal(
          new URL(ours).searchParams.get("X-Amz-Signature"),
          new URL(theirs.url).searchParams.get("X-Amz-Signature"),
        );
      },
    ),
    { numRuns: 300 },
  );
});
