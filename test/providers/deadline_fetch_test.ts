// deadlineFetch on a fake clock: an answer that does not start in time, or a body that stops,
// fails (a retryable Transport error through sendHttp) and aborts the request; a body that keeps
// flowing may take as long as it needs; uploads are left to the whole-request timeout.
import assert from "node:assert/strict";
import { deadlineFetch, ResponseDeadlineError } from "../../providers/deadline_fetch.ts";
import { type FetchFn, sendHttp } from "../../providers/http.ts";
import { isRetryable, StoreError } from "../../providers/types.ts";
import { FakeClock } from "../_fake_clock.ts";

const DEADLINES = { firstByteMs: 1000, stallMs: 500 };

/** A fetch that never answers (until aborted, when `honoursAbort`), recording its signals. */
function silentFetch(honoursAbort: boolean): FetchFn & { signals: AbortSignal[] } {
  const signals: AbortSignal[] = [];
  const fetch = (_url: string, init: RequestInit) => {
    signals.push(init.signal!);
    return new Promise<Response>((_, reject) => {
      if (honoursAbort) init.signal!.addEventListener("abort", () => reject(init.signal!.reason));
    });
  };
  return Object.assign(fetch, { signals });
}

/** A body that sends `pieces`, each `gapMs` after the one before, then ends (or goes silent). */
function trickle(clock: FakeClock, pieces: number, gapMs: number, end: boolean): Response {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent === pieces) {
        if (end) c.close();
        return new Promise(() => {}); // silent from here on
      }
      return new Promise<void>((resolve) =>
        clock.setTimer(gapMs, () => {
          c.enqueue(new Uint8Array([sent++]));
          resolve();
        })
      );
    },
  });
  return new Response(body, { status: 200 });
}

Deno.test("deadlineFetch: no answer within firstByteMs fails and aborts the request", async () => {
  for (const honoursAbort of [true, false]) {
    const clock = new FakeClock();
    const inner = silentFetch(honoursAbort);
    const fetch = deadlineFetch(inner, { ...DEADLINES, clock });
    const started = clock.now();
    const pending = fetch("http://store/k", { method: "GET" });
    await assert.rejects(clock.runUntil(pending), ResponseDeadlineError);
    assert.equal(clock.now() - started, DEADLINES.firstByteMs);
    assert.equal(inner.signals[0].aborted, true, "the request is aborted, its connection freed");
  }
});

Deno.test("deadlineFetch: a body that stops for stallMs fails; one that keeps flowing does not", async () => {
  const clock = new FakeClock();
  // Ten pieces 400 ms apart: 4 s in all, far past both deadlines, but never silent for 500 ms.
  const flowing = deadlineFetch(() => Promise.resolve(trickle(clock, 10, 400, true)), {
    ...DEADLINES,
    clock,
  });
  const ok = await clock.runUntil((async () => {
    const response = await flowing("http://store/k", { method: "GET" });
    return new Uint8Array(await response.arrayBuffer());
  })());
  assert.deepEqual([...ok], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);

  const stalling = deadlineFetch(() => Promise.resolve(trickle(clock, 3, 100, false)), {
    ...DEADLINES,
    clock,
  });
  const response = await stalling("http://store/k", { method: "GET" });
  const started = clock.now();
  await assert.rejects(clock.runUntil(response.arrayBuffer()), (err: unknown) => {
    assert.ok(err instanceof ResponseDeadlineError, String(err));
    assert.match(err.message, /no byte of the body for 500 ms/);
    return true;
  });
  assert.equal(clock.now() - started, 300 + DEADLINES.stallMs, "three pieces, then the stall");
});

Deno.test("deadlineFetch: an upload waits for its answer as long as the request may take", async () => {
  const clock = new FakeClock();
  const fetch = deadlineFetch(
    (_url, init) =>
      new Promise((resolve) =>
        clock.setTimer(5000, () => resolve(new Response(init.body as BodyInit)))
      ),
    { ...DEADLINES, clock },
  );
  const response = await clock.runUntil(
    fetch("http://store/k", { method: "PUT", body: new Uint8Array([1, 2, 3]) }),
  );
  assert.equal(response.status, 200);
});

Deno.test("deadlineFetch: the caller's abort passes through as itself", async () => {
  const clock = new FakeClock();
  const fetch = deadlineFetch(silentFetch(true), { ...DEADLINES, clock });
  const caller = new AbortController();
  const pending = fetch("http://store/k", { method: "GET", signal: caller.signal });
  const reason = new DOMException("the reader went away", "AbortError");
  caller.abort(reason);
  await assert.rejects(pending, (err: unknown) => err === reason);
});

Deno.test("deadlineFetch through sendHttp: a silent store is a retryable Transport error", async () => {
  const clock = new FakeClock();
  const fetch = deadlineFetch(silentFetch(true), { ...DEADLINES, clock });
  const pending = sendHttp(fetch, { method: "GET", url: "http://store/k", headers: {} }, {
    op: "get",
    key: "k",
    clock,
  });
  await assert.rejects(clock.runUntil(pending), (err: unknown) => {
    assert.ok(err instanceof StoreError && err.kind === "Transport", String(err));
    assert.match(err.message, /the store went silent: no answer within 1000 ms/);
    assert.ok(isRetryable(err));
    return true;
  });
});

Deno.test("deadlineFetch through sendHttp: the body's stall deadline is kept while sendHttp reads it", async () => {
  for (const framed of [true, false]) {
    const clock = new FakeClock();
    const withLength = (r: Response) => {
      if (framed) r.headers.set("content-length", "10");
      return r;
    };
    // Ten pieces 400 ms apart: 4 s in all, never silent for 500 ms — read whole.
    const flowing = deadlineFetch(
      () => Promise.resolve(withLength(trickle(clock, 10, 400, true))),
      { ...DEADLINES, clock },
    );
    const ok = await clock.runUntil(
      sendHttp(flowing, { method: "GET", url: "http://store/k", headers: {} }, {
        op: "get",
        key: "k",
        clock,
      }),
    );
    assert.deepEqual([...ok.body], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);

    // Three pieces, then silence: cut stallMs after the last piece, the request aborted.
    const signals: AbortSignal[] = [];
    const stalling = deadlineFetch((_url, init) => {
      signals.push(init.signal!);
      return Promise.resolve(withLength(trickle(clock, 3, 100, false)));
    }, { ...DEADLINES, clock });
    const started = clock.now();
    const pending = sendHttp(stalling, { method: "GET", url: "http://store/k", headers: {} }, {
      op: "get",
      key: "k",
      clock,
    });
    await assert.rejects(clock.runUntil(pending), (err: unknown) => {
      assert.ok(err instanceof StoreError && err.kind === "Transport", String(err));
      assert.match(err.message, /the store went silent: no byte of the body for 500 ms/);
      assert.ok(isRetryable(err));
      return true;
    });
    assert.equal(clock.now() - started, 300 + DEADLINES.stallMs, `framed ${framed}`);
    assert.equal(signals[0].aborted, true, "the request is aborted, its connection freed");
  }
});
