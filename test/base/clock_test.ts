// src/base/clock.ts: the abortable wait (untilAborted) gives up the wait, never the work.
import assert from "node:assert/strict";
import { untilAborted } from "../../src/base/clock.ts";

Deno.test("untilAborted: the promise's value or error when it settles first", async () => {
  const controller = new AbortController();
  assert.equal(await untilAborted(Promise.resolve(7), controller.signal), 7);
  await assert.rejects(untilAborted(Promise.reject(new Error("boom")), controller.signal), /boom/);
});

Deno.test("untilAborted: an abort rejects the wait with its reason; the work goes on", async () => {
  const controller = new AbortController();
  let finish!: (v: string) => void;
  const work = new Promise<string>((resolve) => (finish = resolve));
  const waiting = untilAborted(work, controller.signal);
  const reason = new Error("gave up");
  controller.abort(reason);
  await assert.rejects(waiting, (err) => err === reason);
  finish("done");
  assert.equal(await work, "done");
});

Deno.test("untilAborted: an aborted signal rejects at once; a late rejection is not unhandled", async () => {
  const reason = new DOMException("stop", "AbortError");
  let fail!: (e: Error) => void;
  const work = new Promise<never>((_, reject) => (fail = reject));
  await assert.rejects(untilAborted(work, AbortSignal.abort(reason)), (err) => err === reason);
  fail(new Error("late"));
  await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
});

Deno.test("untilAborted: without a signal, the promise itself", () => {
  const work = Promise.resolve(1);
  assert.equal(untilAborted(work), work);
});
