// StagedMultipart (providers/staging.ts), the multipart flow Azure and GCS share, over fake
// store calls: what it checks before calling the store, and what it asks the store to do.
import assert from "node:assert/strict";
import {
  type StagedCompletion,
  StagedMultipart,
  type StagingCalls,
  type UploadMarker,
  uploadMarkerName,
} from "../../providers/staging.ts";
import { type PutResult, StoreError } from "../../providers/types.ts";

const ROOT = ".staging/";

/** Fake store calls that record what they were asked; markers live in a map. */
function fakeCalls(options: { commit?: PutResult; removeFails?: boolean } = {}) {
  const log: string[] = [];
  const markers = new Map<string, UploadMarker>();
  const listing: { name: string; initiated?: Date }[] = [];
  const calls: StagingCalls<UploadMarker> = {
    checkKey: (key, op) => {
      if (key === "") {
        throw new StoreError("Unsupported", `${op}: empty key`, { code: "InvalidKey" });
      }
    },
    checkMarker: (marker, _key, op) => log.push(`checkMarker ${op} ${marker}`),
    writeMarker: (marker, _key, { op, metadata, contentType }) => {
      log.push(`writeMarker ${op}`);
      markers.set(marker, { metadata: metadata ?? {}, contentType });
      return Promise.resolve();
    },
    stagePart: ({ op, partNumber }) => {
      log.push(`stagePart ${op} ${partNumber}`);
      return Promise.resolve({ partNumber, etag: `e${partNumber}` });
    },
    checkPart: (part) => log.push(`checkPart ${part.partNumber}`),
    readMarker: (marker, { op }) => {
      log.push(`readMarker ${op}`);
      return Promise.resolve(markers.get(marker));
    },
    commit: (c: StagedCompletion<UploadMarker>) => {
      log.push(`commit ${c.parts.map((p) => p.partNumber).join(",")} ifAbsent=${c.ifAbsent}`);
      log.push(`metadata ${JSON.stringify(c.upload)}`);
      return Promise.resolve(options.commit ?? { status: "Created", etag: "x" });
    },
    removeStaged: (marker, op) => {
      log.push(`removeStaged ${op} ${marker === [...markers.keys()][0]}`);
      return options.removeFails ? Promise.reject(new Error("gone wrong")) : Promise.resolve();
    },
    listStaged: (prefix, op) => {
      log.push(`listStaged ${op} ${prefix}`);
      return Promise.resolve(listing.filter((o) => o.name.startsWith(prefix)));
    },
    isStagedName: (last) => /^part-\d{5}$/.test(last),
  };
  return { calls, log, markers, listing };
}

const code = (want: string) => (err: unknown) =>
  err instanceof StoreError && err.detail.code === want;

Deno.test("staged multipart: create checks key and metadata, then writes the marker", async () => {
  const { calls, log, markers } = fakeCalls();
  const multipart = new StagedMultipart(ROOT, calls);
  await assert.rejects(multipart.createMultipart(""), code("InvalidKey"));
  await assert.rejects(multipart.createMultipart("k", { metadata: { "Bad Name": "v" } }));
  assert.equal(log.length, 0);
  const id = await multipart.createMultipart("a/k", {
    metadata: { owner: "t" },
    contentType: "text/plain",
  });
  assert.match(id, /^[0-9a-f]{32}$/);
  const marker = uploadMarkerName(ROOT, "a/k", id);
  assert.deepEqual(log, [`checkMarker createMultipart ${marker}`, "writeMarker createMultipart"]);
  assert.deepEqual(markers.get(marker), { metadata: { owner: "t" }, contentType: "text/plain" });
  assert.equal(new StagedMultipart(undefined, calls).root, ".tierd-multipart/");
});

Deno.test("staged multipart: putPart refuses bad part numbers and foreign ids first", async () => {
  const { calls, log } = fakeCalls();
  const multipart = new StagedMultipart(ROOT, calls);
  const id = await multipart.createMultipart("k");
  log.length = 0;
  await assert.rejects(multipart.putPart("k", id, 0, new Uint8Array(1)), code("InvalidArgument"));
  await assert.rejects(multipart.putPart("k", "nope", 1, new Uint8Array(1)), code("NoSuchUpload"));
  assert.equal(log.length, 0);
  assert.deepEqual(await multipart.putPart("k", id, 3, new Uint8Array(1)), {
    partNumber: 3,
    etag: "e3",
  });
  assert.deepEqual(log, ["stagePart putPart 3"]);
});

Deno.test("staged multipart: completion checks parts, reads the marker, commits, cleans up", async () => {
  const { calls, log } = fakeCalls();
  const multipart = new StagedMultipart(ROOT, calls);
  const id = await multipart.createMultipart("k", { metadata: { a: "1" } });
  log.length = 0;
  await assert.rejects(multipart.completeMultipart("k", id, []), code("InvalidPart"));
  const twice = [{ partNumber: 1, etag: "e1" }, { partNumber: 1, etag: "e1" }];
  await assert.rejects(multipart.completeMultipart("k", id, twice), code("InvalidPartOrder"));
  assert.deepEqual(log, ["checkPart 1"], "nothing is read before the parts pass");
  log.length = 0;
  const parts = [{ partNumber: 2, etag: "e2" }, { partNumber: 1, etag: "e1" }];
  assert.deepEqual(await multipart.completeMultipart("k", id, parts, { ifAbsent: true }), {
    status: "Created",
    etag: "x",
  });
  assert.deepEqual(log.filter((l) => !l.startsWith("checkMarker")), [
    "checkPart 1",
    "checkPart 2",
    "readMarker completeMultipart",
    "commit 1,2 ifAbsent=true",
    'metadata {"metadata":{"a":"1"}}',
    "removeStaged completeMultipart true",
  ]);
  const other = uploadMarkerName(ROOT, "k", "0".repeat(32));
  await assert.rejects(
    multipart.completeMultipart("k", "0".repeat(32), parts),
    code("NoSuchUpload"),
    `no marker at ${other}`,
  );
});

Deno.test("staged multipart: a refused completion keeps the upload; a failed cleanup is no failure", async () => {
  const refused = fakeCalls({ commit: { status: "AlreadyExists" } });
  const a = new StagedMultipart(ROOT, refused.calls);
  const id = await a.createMultipart("k");
  const parts = [{ partNumber: 1, etag: "e1" }];
  assert.deepEqual(await a.completeMultipart("k", id, parts, { ifAbsent: true }), {
    status: "AlreadyExists",
  });
  assert.ok(!refused.log.some((l) => l.startsWith("removeStaged")));
  const failing = fakeCalls({ removeFails: true });
  const b = new StagedMultipart(ROOT, failing.calls);
  const id2 = await b.createMultipart("k");
  assert.equal((await b.completeMultipart("k", id2, parts)).status, "Created");
});

Deno.test("staged multipart: abort removes what is staged; an id not ours is nothing", async () => {
  const { calls, log } = fakeCalls();
  const multipart = new StagedMultipart(ROOT, calls);
  const id = await multipart.createMultipart("k");
  log.length = 0;
  await multipart.abortMultipart("k", "not-an-id");
  assert.equal(log.length, 0);
  await multipart.abortMultipart("k", id);
  assert.deepEqual(log.filter((l) => !l.startsWith("checkMarker")), [
    "removeStaged abortMultipart true",
  ]);
  await assert.rejects(multipart.abortMultipart("", id), code("InvalidKey"));
});

Deno.test("staged multipart: listing names each upload once, strays included, oldest time", async () => {
  const { calls, listing, log } = fakeCalls();
  const multipart = new StagedMultipart(ROOT, calls);
  const [a, b] = ["a".repeat(32), "b".repeat(32)];
  const at = (s: number) => new Date(1_700_000_000_000 + s * 1000);
  listing.push(
    { name: `${ROOT}logs/x/${a}`, initiated: at(5) },
    { name: `${ROOT}logs/x/${a}/part-00001`, initiated: at(3) },
    { name: `${ROOT}logs/y/${b}/part-00002`, initiated: at(9) },
    { name: `${ROOT}logs/y/${b}/part-00001` },
    { name: `${ROOT}logs/z/${b}/other` },
    { name: `${ROOT}other/${a}`, initiated: at(1) },
  );
  assert.deepEqual(await multipart.listMultipartUploads("logs/"), [
    { key: "logs/x", uploadId: a, initiated: at(3) },
    { key: "logs/y", uploadId: b, initiated: at(9) },
  ]);
  assert.deepEqual(log, [`listStaged listMultipartUploads ${ROOT}logs/`]);
});
