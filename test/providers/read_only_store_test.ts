// A read-only store passes every read through and refuses every write before it reaches the
// store underneath: the bucket's objects and uploads are exactly what they were.
import assert from "node:assert/strict";
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import { readOnlyStore, WriteRefused } from "../../providers/read_only_store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { isRetryable } from "../../providers/types.ts";

Deno.test("readOnlyStore: reads go through, writes are refused without a request", async () => {
  const sim = new SimStore();
  await sim.put("a/1", new Uint8Array([1, 2, 3]), { metadata: { k: "v" } });
  const upload = await sim.createMultipart("a/2");
  const sent: StoreOp[] = [];
  const inner = decorateStore(sim, (call) => {
    sent.push(call.op);
    return call.run(call.signal);
  });
  const store = readOnlyStore(inner);

  assert.deepEqual((await store.get("a/1")).bytes, new Uint8Array([1, 2, 3]));
  assert.equal((await store.head("a/1")).metadata.k, "v");
  assert.deepEqual((await store.list("a/")).objects.map((o) => o.key), ["a/1"]);
  assert.equal((await store.listMultipartUploads("a/")).length, 1);

  const writes: [StoreOp, () => Promise<unknown>][] = [
    ["put", () => store.put("a/1", new Uint8Array([9]))],
    ["put", () => store.put("a/3", new Uint8Array([9]), { ifAbsent: true })],
    ["delete", () => store.deleteMany(["a/1"])],
    ["create_multipart", () => store.createMultipart("a/4")],
    ["put_part", () => store.putPart("a/2", upload, 1, new Uint8Array(5))],
    ["complete_multipart", () => store.completeMultipart("a/2", upload, [])],
    ["abort_multipart", () => store.abortMultipart("a/2", upload)],
  ];
  for (const [op, write] of writes) {
    await assert.rejects(write(), (err: unknown) => {
      assert.ok(err instanceof WriteRefused, String(err));
      assert.equal(err.op, op);
      assert.equal(isRetryable(err), false, "a refused write is not a store fault");
      return true;
    });
  }
  assert.deepEqual(sent, ["get", "head", "list", "list_multipart_uploads"]);
  assert.deepEqual((await sim.get("a/1")).bytes, new Uint8Array([1, 2, 3]));
  assert.deepEqual((await sim.list("a/")).objects.map((o) => o.key), ["a/1"]);
  assert.equal((await sim.listMultipartUploads("a/")).length, 1);
});
