import assert from "node:assert/strict";
import { OpClassPacer } from "../../providers/pacer.ts";

Deno.test("throttling slows only its operation class, and success speeds it back up", () => {
  const p = new OpClassPacer();
  assert.equal(p.delayOf("upload"), 0);
  p.throttled("upload");
  p.throttled("upload");
  p.throttled("upload");
  assert.equal(p.delayOf("upload"), 400);
  assert.equal(p.delayOf("housekeeping"), 0, "other classes are untouched");
  for (let i = 0; i < 10; i++) p.throttled("upload");
  assert.equal(p.delayOf("upload"), 5000, "capped");
  for (let i = 0; i < 12; i++) p.succeeded("upload");
  assert.equal(p.delayOf("upload"), 0, "recovers fully");
});
