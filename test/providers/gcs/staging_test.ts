// The multipart staging names GCS and Azure share (providers/staging.ts): a marker and the
// objects staged next to it parse back to their key and upload id, whatever the key holds.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  isUploadId,
  newUploadId,
  parseStagingName,
  uploadMarkerName,
} from "../../../providers/staging.ts";

const ROOT = ".tierd-multipart/";
const staged = (last: string) => /^part-\d{5}$/.test(last);

Deno.test("staging: upload ids are 32 hex digits, fresh each time", () => {
  const ids = new Set(Array.from({ length: 100 }, newUploadId));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.ok(isUploadId(id));
  assert.ok(!isUploadId("0123"));
});

Deno.test("staging: markers and staged parts parse back to key and upload, for any key", () => {
  fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 60 }), (key) => {
    const id = newUploadId();
    const marker = uploadMarkerName(ROOT, key, id);
    assert.deepEqual(parseStagingName(ROOT, marker, staged), { key, uploadId: id, marker: true });
    assert.deepEqual(parseStagingName(ROOT, `${marker}/part-00007`, staged), {
      key,
      uploadId: id,
      marker: false,
    });
    assert.equal(parseStagingName(ROOT, `${marker}/other`, staged), undefined);
  }));
});

Deno.test("staging: names that only look close are not uploads", () => {
  const id = newUploadId();
  assert.equal(parseStagingName(ROOT, `elsewhere/k/${id}`), undefined);
  assert.equal(parseStagingName(ROOT, `${ROOT}${id}`), undefined, "no key");
  assert.equal(parseStagingName(ROOT, `${ROOT}k/${id.slice(1)}`), undefined);
  // A key that itself looks like a staged part of another upload parses as what it is.
  assert.deepEqual(parseStagingName(ROOT, `${ROOT}k/${id}/part-00001/${id}`, staged), {
    key: `k/${id}/part-00001`,
    uploadId: id,
    marker: true,
  });
});
