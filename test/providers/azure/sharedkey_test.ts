// The SharedKey signer stage by stage: canonicalized headers, canonicalized resource (the
// account twice with Azurite's path-style URLs), the string to sign (an empty Content-Length for
// 0), and the HMAC against node:crypto as an independent oracle.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import {
  authorization,
  canonicalizedHeaders,
  canonicalizedResource,
  importAccountKey,
  signature,
  stringToSign,
} from "../../../providers/azure/sharedkey.ts";
import { AZURITE_KEY } from "../../fixtures/azurite.ts";

Deno.test("sharedkey: canonicalized headers are the x-ms-* ones, lowercased, sorted, trimmed", () => {
  assert.equal(
    canonicalizedHeaders({
      "x-ms-version": "2024-11-04",
      "X-MS-Date": "Mon, 01 Jan 2024 00:00:00 GMT",
      "content-type": "application/octet-stream",
      "x-ms-meta-end_offset": "  41 ",
      "x-ms-blob-type": "BlockBlob",
      "authorization": "ignored",
    }),
    "x-ms-blob-type:BlockBlob\n" +
      "x-ms-date:Mon, 01 Jan 2024 00:00:00 GMT\n" +
      "x-ms-meta-end_offset:41\n" +
      "x-ms-version:2024-11-04\n",
  );
  assert.equal(canonicalizedHeaders({ "content-length": "3" }), "");
});

Deno.test("sharedkey: canonicalized resource names the account, then sorted lowercase query names", () => {
  assert.equal(
    canonicalizedResource("acct", "/container/a%20b", [["comp", "list"], ["restype", "container"]]),
    "/acct/container/a%20b\ncomp:list\nrestype:container",
  );
  // Azurite's path-style URL carries the account in the path: it appears twice.
  assert.equal(
    canonicalizedResource("devstoreaccount1", "/devstoreaccount1/c/k", []),
    "/devstoreaccount1/devstoreaccount1/c/k",
  );
  // Names lowercased and sorted, values raw (decoded), repeated names comma-joined and sorted.
  assert.equal(
    canonicalizedResource("a", "/c", [["Prefix", "x y+z/"], ["comp", "list"], ["include", "b"], [
      "include",
      "a",
    ]]),
    "/a/c\ncomp:list\ninclude:a,b\nprefix:x y+z/",
  );
  assert.equal(canonicalizedResource("a", "", []), "/a/");
});

Deno.test("sharedkey: the string to sign of a Put Blob and of an empty PUT", () => {
  const headers = {
    "content-length": "11",
    "content-type": "application/octet-stream",
    "if-none-match": "*",
    "x-ms-blob-type": "BlockBlob",
    "x-ms-date": "Fri, 01 Mar 2024 12:00:00 GMT",
    "x-ms-version": "2024-11-04",
  };
  assert.equal(
    stringToSign("acct", { method: "put", path: "/c/a/b.log", query: [], headers }),
    [
      "PUT",
      "", // Content-Encoding
      "", // Content-Language
      "11", // Content-Length
      "", // Content-MD5
      "application/octet-stream",
      "", // Date (x-ms-date is used)
      "", // If-Modified-Since
      "", // If-Match
      "*", // If-None-Match
      "", // If-Unmodified-Since
      "", // Range
      "x-ms-blob-type:BlockBlob",
      "x-ms-date:Fri, 01 Mar 2024 12:00:00 GMT",
      "x-ms-version:2024-11-04",
      "/acct/c/a/b.log",
    ].join("\n"),
  );
  // Since 2015-02-21 a zero Content-Length is signed as the empty string.
  const empty = stringToSign("acct", {
    method: "PUT",
    path: "/c",
    query: [["restype", "container"]],
    headers: { "content-length": "0", "x-ms-date": "D", "x-ms-version": "V" },
  });
  assert.equal(empty.split("\n")[3], "");
  assert.ok(empty.endsWith("\nx-ms-date:D\nx-ms-version:V\n/acct/c\nrestype:container"));
});

Deno.test("sharedkey: the signature is base64 HMAC-SHA256 with the decoded key (node:crypto oracle)", async () => {
  const key = await importAccountKey(AZURITE_KEY);
  await fc.assert(
    fc.asyncProperty(fc.string({ maxLength: 200 }), async (text) => {
      const expected = createHmac("sha256", Buffer.from(AZURITE_KEY, "base64")).update(text, "utf8")
        .digest("base64");
      assert.equal(await signature(key, text), expected);
    }),
    { numRuns: 50 },
  );
  const header = await authorization("devstoreaccount1", key, {
    method: "GET",
    path: "/devstoreaccount1/c",
    query: [["restype", "container"], ["comp", "list"]],
    headers: { "x-ms-date": "Fri, 01 Mar 2024 12:00:00 GMT", "x-ms-version": "2024-11-04" },
  });
  assert.match(header, /^SharedKey devstoreaccount1:[A-Za-z0-9+/]{43}=$/);
});

Deno.test("sharedkey: a key that is not base64 is refused before any request", () => {
  assert.throws(() => importAccountKey("not base64!"), TypeError);
});
