// The pure GCS answer parsers: object resources (size and generation as strings), list pages,
// every error shape GCS uses (JSON API, OAuth, XML from media downloads, bare text), and
// malformed answers.
import assert from "node:assert/strict";
import {
  errorKind,
  generationOf,
  listPage,
  parseErrorInfo,
  parseList,
  parseObject,
  replaceRefusal,
} from "../../../providers/gcs/responses.ts";
import { StoreError } from "../../../providers/types.ts";

const bytes = (value: string | object) =>
  new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));

// The shape of `storage#object` (trimmed): numbers that may exceed 2^53 come as strings.
const OBJECT = {
  kind: "storage#object",
  id: "tier/iggy/a.log/1709294400123456",
  name: "iggy/a.log",
  bucket: "tier",
  generation: "1709294400123456",
  metageneration: "1",
  contentType: "application/octet-stream",
  size: "1234",
  md5Hash: "1B2M2Y8AsgTpgAmY7PhCfg==",
  etag: "CMDq4bWL/YQDEAE=",
  timeCreated: "2024-03-01T12:00:00.123Z",
  updated: "2024-03-01T12:00:00.123Z",
  metadata: { "end-offset": "41", format: "iggy-0.9" },
};

Deno.test("gcs responses: an object resource", () => {
  const object = parseObject(OBJECT, "head");
  assert.equal(object.key, "iggy/a.log");
  assert.equal(object.size, 1234);
  assert.equal(object.generation, "1709294400123456");
  assert.equal(object.etag, "CMDq4bWL/YQDEAE=");
  assert.deepEqual(object.metadata, { "end-offset": "41", format: "iggy-0.9" });
  assert.deepEqual(object.lastModified, new Date("2024-03-01T12:00:00.123Z"));
  assert.deepEqual(parseObject({ ...OBJECT, metadata: undefined }, "head").metadata, {});
  // The hashes GCS keeps: md5Hash here, crc32c on every object (a composed one has no md5Hash).
  assert.deepEqual(object.stored, [{
    algorithm: "md5",
    value: "1B2M2Y8AsgTpgAmY7PhCfg==",
    type: "full",
  }]);
  const { md5Hash: _, ...composed } = { ...OBJECT, crc32c: "ifj56A==", componentCount: 2 };
  assert.deepEqual(parseObject(composed, "head").stored, [
    { algorithm: "crc32c", value: "ifj56A==", type: "full" },
  ]);
  for (
    const bad of [
      { ...OBJECT, size: "-1" },
      { ...OBJECT, size: "" },
      { ...OBJECT, size: "1e3x" },
      { ...OBJECT, name: 3 },
      { ...OBJECT, generation: null },
      [],
    ]
  ) {
    assert.throws(
      () => parseObject(bad, "head"),
      (err: unknown) => err instanceof StoreError && err.kind === "Malformed",
    );
  }
});

Deno.test("gcs responses: list pages, with and without a next page", () => {
  const page = parseList(
    bytes({ kind: "storage#objects", items: [OBJECT], nextPageToken: "CgppZ2d5L2EubG9n" }),
  );
  assert.equal(page.nextPageToken, "CgppZ2d5L2EubG9n");
  assert.deepEqual(listPage(page), {
    objects: [{
      key: "iggy/a.log",
      size: 1234,
      etag: "CMDq4bWL/YQDEAE=",
      lastModified: new Date("2024-03-01T12:00:00.123Z"),
    }],
    continuationToken: "CgppZ2d5L2EubG9n",
  });
  assert.deepEqual(listPage(parseList(bytes({ kind: "storage#objects" }))), { objects: [] });
  for (const bad of ["<html>", '{"items": {}}', '{"items": [], "nextPageToken": 5}', "[]", ""]) {
    assert.throws(
      () => parseList(bytes(bad)),
      (err: unknown) => err instanceof StoreError && err.kind === "Malformed",
      bad,
    );
  }
});

Deno.test("gcs responses: every error shape yields a reason code", () => {
  const api = parseErrorInfo(
    404,
    bytes({
      error: {
        code: 404,
        message: "The specified bucket does not exist.",
        errors: [{
          message: "The specified bucket does not exist.",
          domain: "global",
          reason: "notFound",
        }],
      },
    }),
  );
  assert.deepEqual([api.code, api.message], ["notFound", "The specified bucket does not exist."]);
  const oauth = parseErrorInfo(
    401,
    bytes({ error: "invalid_token", error_description: "Invalid Credentials" }),
  );
  assert.deepEqual([oauth.code, oauth.message], ["invalid_token", "Invalid Credentials"]);
  const xml = parseErrorInfo(
    416,
    bytes(
      "<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidRange</Code><Message>The requested range cannot be satisfied.</Message></Error>",
    ),
  );
  assert.equal(xml.code, "InvalidRange");
  assert.deepEqual([
    parseErrorInfo(404, bytes("Not Found\n")).code,
    parseErrorInfo(404, bytes("Not Found\n")).message,
  ], ["notFound", "Not Found"]);
  assert.equal(parseErrorInfo(503, new Uint8Array()).code, "backendError");
  assert.match(parseErrorInfo(500, bytes("{not json")).message, /unexpected error body/);
});

Deno.test("gcs responses: error kinds by reason, then by status", () => {
  const cases: Array<[string, number, string]> = [
    ["notFound", 404, "NotFound"],
    ["conditionNotMet", 412, "PreconditionFailed"],
    ["requestedRangeNotSatisfiable", 416, "InvalidRange"],
    ["rateLimitExceeded", 429, "Throttled"],
    ["backendError", 503, "Throttled"],
    ["internalError", 500, "Transport"],
    ["authError", 401, "Auth"],
    ["forbidden", 403, "Auth"],
    ["invalid_token", 401, "Auth"],
    ["badGateway", 502, "Transport"],
    ["invalid", 400, "Unsupported"],
  ];
  for (const [code, status, kind] of cases) assert.equal(errorKind(code, status), kind, code);
});

Deno.test("gcs responses: a refused ifGenerationMatch upload is PreconditionFailed", () => {
  // fake-gcs-server 1.56.1's answer to a stale generation and to a missing object alike.
  const fake = bytes(
    '{"error":{"code":412,"message":"Precondition failed","errors":[{"domain":"global","reason":"conditionNotMet","message":"Precondition failed"}]}}',
  );
  const stale = replaceRefusal(parseErrorInfo(412, fake), "owner");
  assert.equal(stale?.kind, "PreconditionFailed");
  assert.equal(stale.detail.code, "conditionNotMet");
  // GCS's documented shape for a missing object, should an upload ever answer 404.
  const missing = bytes({
    error: {
      code: 404,
      message: "No such object: tier/owner",
      errors: [{ message: "No such object: tier/owner", domain: "global", reason: "notFound" }],
    },
  });
  const absent = replaceRefusal(parseErrorInfo(404, missing), "owner");
  assert.equal(absent?.kind, "PreconditionFailed");
  assert.equal(absent.detail.status, 404);
  assert.match(absent.message, /no object to replace/);
  const noBucket = bytes({
    error: {
      code: 404,
      message: "The specified bucket does not exist.",
      errors: [{ message: "The specified bucket does not exist.", reason: "notFound" }],
    },
  });
  assert.equal(replaceRefusal(parseErrorInfo(404, noBucket), "owner"), undefined);
  assert.equal(replaceRefusal(parseErrorInfo(503, new Uint8Array()), "owner"), undefined);
});

Deno.test("gcs responses: a media download's generation", () => {
  assert.equal(
    generationOf(new Headers({ "x-goog-generation": "1709294400123456" })),
    "1709294400123456",
  );
  assert.equal(generationOf(new Headers()), undefined);
});
