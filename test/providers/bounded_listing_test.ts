// A bounded listing against a scripted store: an honest store of any size lists exactly its
// keys, and every way a hostile or broken store can make a listing endless — a token that
// repeats, keys that go back or repeat, empty pages or distinct pages without end, answers that
// bring no new key — ends in the named error after a bounded number of requests.
import assert from "node:assert/strict";
import fc from "fast-check";
import { sleep } from "../../src/base/clock.ts";
import { compareUtf8 } from "../../providers/key_rules.ts";
import {
  listBounded,
  type ListingOptions,
  type ListingProgress,
  listPages,
  PageGuard,
} from "../../providers/listing.ts";
import { type ListPage, type ObjectStore, StoreError } from "../../providers/types.ts";
import { FakeClock } from "../_fake_clock.ts";
import { rejectsWith } from "./_faults.ts";

/** One `list` call the scripted store received. */
interface ListCall {
  prefix: string;
  token?: string;
  maxKeys?: number;
  signal?: AbortSignal;
}

/** Answers call number `n` (1-based). */
type Script = (call: ListCall, n: number) => ListPage | Promise<ListPage>;

/**
 * A store whose `list` answers from `script`. Past `budget` calls it throws a plain error, so a
 * listing the guard failed to stop ends the test instead of hanging it.
 */
function scriptedStore(script: Script, budget = 20_000): { store: ObjectStore; calls: ListCall[] } {
  const calls: ListCall[] = [];
  const unsupported = () => Promise.reject(new StoreError("Unsupported", "scripted store"));
  const store: ObjectStore = {
    kind: "scripted",
    list(prefix, options = {}) {
      const call = {
        prefix,
        token: options.continuationToken,
        maxKeys: options.maxKeys,
        signal: options.signal,
      };
      calls.push(call);
      if (calls.length > budget) throw new Error(`the listing went past ${budget} requests`);
      return Promise.resolve(script(call, calls.length));
    },
    put: unsupported,
    get: unsupported,
    head: unsupported,
    deleteMany: unsupported,
    createMultipart: unsupported,
    putPart: unsupported,
    completeMultipart: unsupported,
    abortMultipart: unsupported,
    listMultipartUploads: unsupported,
  };
  return { store, calls };
}

/** A store that answers `pages` in turn, checking each call resumes from the token before. */
function pagedStore(pages: readonly ListPage[]) {
  return scriptedStore((call, n) => {
    assert.equal(call.token, pages[n - 2]?.continuationToken, `call ${n} resumes where it left`);
    const page = pages[n - 1];
    assert.ok(page, `call ${n} asks past the last page`);
    return page;
  });
}

const page = (keys: readonly string[], token?: string): ListPage =>
  token === undefined
    ? { objects: keys.map((key) => ({ key, size: 0 })) }
    : { objects: keys.map((key) => ({ key, size: 0 })), continuationToken: token };

/** `keys` cut into pages of `size` (empty pages with a token where `empties` say), tokens t1…. */
function honestPages(keys: readonly string[], size: number, empties: readonly number[] = []) {
  const chunks: string[][] = [];
  for (let i = 0; i < keys.length; i += size) chunks.push(keys.slice(i, i + size));
  if (chunks.length === 0) chunks.push([]);
  for (const at of empties) chunks.splice(at % (chunks.length + 1), 0, []);
  // A page that is not the last carries a token; an empty last page would end the listing early.
  if (chunks.length > 1 && chunks.at(-1)!.length === 0) chunks.pop();
  return chunks.map((chunk, i) => page(chunk, i < chunks.length - 1 ? `t${i + 1}` : undefined));
}

/** Sequential keys that sort in both byte orders: k000000, k000001, …. */
const seqKey = (i: number) => `k${String(i).padStart(6, "0")}`;

const utf16 = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

// Characters where the byte orders disagree: ～ (U+FF5E) sorts before 😀 in UTF-8, after it in
// UTF-16; U+E000 likewise.
const keyArb = fc.string({
  unit: fc.constantFrom("a", "b", "/", "-", "é", "日", "～", "😀", "\uE000"),
  minLength: 1,
  maxLength: 5,
});

function assertFault(err: StoreError, code: string, pages?: number): void {
  assert.equal(err.detail.code, code, err.message);
  assert.equal(err.detail.op, "list");
  assert.match(err.message, /^scripted store: list of prefix "p\/" stopped after \d+ pages/);
  if (pages !== undefined) assert.match(err.message, new RegExp(`after ${pages} pages and `));
}

Deno.test("bounded listing: an honest store of any size and page size lists exactly its keys", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(keyArb, { maxLength: 60 }),
      fc.integer({ min: 1, max: 7 }),
      fc.constantFrom(compareUtf8, utf16), // S3 and GCS; Azure
      fc.array(fc.nat(), { maxLength: 3 }),
      async (keys, size, order, empties) => {
        const sorted = [...keys].sort(order);
        const pages = honestPages(sorted, size, empties);
        const seen: ListingProgress[] = [];
        const { store, calls } = pagedStore(pages);
        const options = { pageSize: size, onPage: (p: ListingProgress) => seen.push(p) };
        const listed: string[][] = [];
        for await (const objects of listPages(store, "p/", options)) {
          listed.push(objects.map((o) => o.key));
        }
        assert.deepEqual(listed, pages.map((p) => p.objects.map((o) => o.key)));
        assert.ok(calls.every((c) => c.maxKeys === size && c.prefix === "p/"));
        let keysSoFar = 0;
        assert.deepEqual(
          seen,
          pages.map((p, i) => ({ pages: i + 1, keys: keysSoFar += p.objects.length })),
          "onPage sees every page",
        );
        const all = await listBounded(pagedStore(pages).store, "p/", { pageSize: size });
        assert.deepEqual(all.map((o) => o.key), sorted);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("bounded listing: a token that repeats after any number of pages is ListingLoop", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 40 }),
      fc.nat(),
      fc.integer({ min: 0, max: 3 }),
      async (honest, back, size) => {
        const repeated = (back % honest) + 1;
        let next = 0;
        const { store, calls } = scriptedStore((_call, n) => {
          const keys = Array.from({ length: size }, () => seqKey(next++));
          return page(keys, n <= honest ? `t${n}` : `t${repeated}`);
        });
        const err = await rejectsWith(listBounded(store, "p/"), "Malformed");
        assertFault(err, "ListingLoop", honest + 1);
        assert.match(err.message, new RegExp(`repeats that of page ${repeated} `));
        assert.equal(calls.length, honest + 1, "no request after the page that loops");
      },
    ),
  );
});

Deno.test("bounded listing: keys that go back or repeat, within a page or across, are ListingNotAdvancing", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(keyArb, { minLength: 2, maxLength: 40 }),
      fc.constantFrom(compareUtf8, utf16),
      fc.integer({ min: 1, max: 6 }),
      fc.nat(),
      fc.nat(),
      async (keys, order, size, at, from) => {
        const sorted = [...keys].sort(order);
        const p = 1 + (at % (sorted.length - 1));
        const q = from % p; // keys[q] is at or before keys[p - 1]: a repeat or a step back
        const sequence = [...sorted.slice(0, p), sorted[q], ...sorted.slice(p)];
        const { store, calls } = pagedStore(honestPages(sequence, size));
        const err = await rejectsWith(listBounded(store, "p/"), "Malformed");
        assertFault(err, "ListingNotAdvancing", Math.floor(p / size) + 1);
        assert.equal(calls.length, Math.floor(p / size) + 1, "no request after the bad page");
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("bounded listing: a listing keeps to one byte order", async () => {
  // ～ then 😀 is UTF-8 order, 😀 then U+E000 only UTF-16's: no total order has all three so.
  const { store } = pagedStore([page(["a", "～"], "t1"), page(["😀", "\uE000"])]);
  const err = await rejectsWith(listBounded(store, "p/"), "Malformed");
  assertFault(err, "ListingNotAdvancing", 2);
  assert.match(err.message, /key "\uE000" does not sort after "😀"/);
});

Deno.test("bounded listing: endless empty pages are ListingNotAdvancing after maxEmptyPages", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: 5 }),
      fc.integer({ min: 0, max: 50 }),
      async (honest, maxEmptyPages) => {
        const { store, calls } = scriptedStore((_call, n) =>
          page(n <= honest ? [seqKey(n)] : [], `t${n}`)
        );
        const err = await rejectsWith(listBounded(store, "p/", { maxEmptyPages }), "Malformed");
        assertFault(err, "ListingNotAdvancing", honest + maxEmptyPages + 1);
        assert.equal(calls.length, honest + maxEmptyPages + 1);
      },
    ),
  );
});

Deno.test("bounded listing: endless distinct pages are ListingTooLong past maxPages or maxKeys", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 60 }),
      fc.integer({ min: 1, max: 4 }),
      fc.boolean(),
      async (limit, size, byKeys) => {
        let next = 0;
        const { store, calls } = scriptedStore((_call, n) =>
          page(Array.from({ length: size }, () => seqKey(next++)), `t${n}`)
        );
        const bounds: ListingOptions = byKeys ? { maxKeys: limit } : { maxPages: limit };
        const err = await rejectsWith(listBounded(store, "p/", bounds), "Malformed");
        assertFault(err, "ListingTooLong");
        if (byKeys) {
          assert.match(err.message, new RegExp(`and ${limit} keys: more than ${limit} keys$`));
          assert.equal(calls.length, Math.floor(limit / size) + 1);
        } else {
          assert.match(err.message, new RegExp(`after ${limit} pages .*more than ${limit} pages$`));
          assert.equal(calls.length, limit, "the page past maxPages is never asked for");
        }
      },
    ),
  );
});

Deno.test("bounded listing: the default bounds end endless pages", async () => {
  const distinct = scriptedStore((_call, n) => page([seqKey(n)], `t${n}`));
  assertFault(
    await rejectsWith(listBounded(distinct.store, "p/"), "Malformed"),
    "ListingTooLong",
    10_000,
  );
  assert.equal(distinct.calls.length, 10_000);
  const empty = scriptedStore((_call, n) => page([], `t${n}`));
  assertFault(
    await rejectsWith(listBounded(empty.store, "p/"), "Malformed"),
    "ListingNotAdvancing",
    101,
  );
});

Deno.test("bounded listing: answers that bring no new key fail with ListingStalled on the clock", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 60_000 }),
      fc.integer({ min: 1, max: 30 }),
      fc.nat(),
      async (delayMs, pagesWorth, less) => {
        const timeoutMs = delayMs * pagesWorth - (less % delayMs);
        const clock = new FakeClock();
        const started = clock.now();
        const { store, calls } = scriptedStore(async (call, n) => {
          await sleep(delayMs, call.signal, clock);
          return page([], `t${n}`);
        });
        const listing = listBounded(store, "p/", {
          clock,
          progressTimeoutMs: timeoutMs,
          maxEmptyPages: Infinity,
        });
        const err = await rejectsWith(
          clock.runUntil(listing, { maxStepMs: Infinity }),
          "Transport",
        );
        assertFault(err, "ListingStalled");
        assert.ok(clock.now() - started >= timeoutMs, "not before the timeout");
        assert.ok(calls.length <= pagesWorth, `${calls.length} requests`);
      },
    ),
    { numRuns: 40 },
  );
});

Deno.test("bounded listing: a page that never comes is given up at the timeout, its request aborted", async () => {
  const clock = new FakeClock();
  let asked!: () => void;
  const requested = new Promise<void>((resolve) => (asked = resolve));
  const { store, calls } = scriptedStore((call) =>
    new Promise<ListPage>((_resolve, reject) => {
      call.signal?.addEventListener("abort", () => reject(call.signal?.reason));
      asked();
    })
  );
  const listing = listBounded(store, "p/", { clock, progressTimeoutMs: 1000 });
  listing.catch(() => {});
  await requested;
  clock.advance(1000);
  const err = await rejectsWith(listing, "Transport");
  assertFault(err, "ListingStalled", 0);
  assert.equal(calls[0].signal?.aborted, true, "the request was aborted");
  assert.equal(calls[0].signal?.reason, err);
});

Deno.test("bounded listing: a slow store that brings new keys, and a slow caller, never stall", async () => {
  const clock = new FakeClock();
  const { store } = scriptedStore(async (call, n) => {
    await sleep(900, call.signal, clock);
    return page([seqKey(n)], n < 20 ? `t${n}` : undefined);
  });
  const listed = await clock.runUntil(
    listBounded(store, "p/", { clock, progressTimeoutMs: 1000 }),
    { maxStepMs: Infinity },
  );
  assert.equal(listed.length, 20, "18 s of listing, never 1 s without a new key");

  // The caller's own time between pages does not count against the store.
  const empty = scriptedStore((_call, n) => page([], n < 5 ? `t${n}` : undefined));
  let pages = 0;
  for await (const _ of listPages(empty.store, "p/", { clock, progressTimeoutMs: 1000 })) {
    clock.advance(10_000);
    pages++;
  }
  assert.equal(pages, 5);
});

Deno.test("bounded listing: the caller's signal stops it with its own reason", async () => {
  const stop = new AbortController();
  const { store } = scriptedStore((_call, n) => {
    if (n === 3) stop.abort(new Error("shutting down"));
    return page([seqKey(n)], `t${n}`);
  });
  await assert.rejects(
    listBounded(store, "p/", { signal: stop.signal }),
    (err: unknown) => err instanceof Error && err.message === "shutting down",
  );
});

Deno.test("bounded listing: errors name the store as described, the prefix and the progress", async () => {
  const { store } = pagedStore([page(["a", "b"], "t1"), page(["c"], "t1")]);
  const err = await rejectsWith(
    listBounded(store, "iggy/", { describe: "s3 http://127.0.0.1:9000 bucket 'b'" }),
    "Malformed",
  );
  assert.equal(
    err.message,
    `s3 http://127.0.0.1:9000 bucket 'b': list of prefix "iggy/" stopped after 2 pages and ` +
      `2 keys: the continuation token repeats that of page 1 (the store loops)`,
  );
  assert.deepEqual(err.detail, { op: "list", code: "ListingLoop" });
});

Deno.test("page guard: with markers, uploads may come in any order while the markers advance", () => {
  // AWS: by key, then by initiation (ids in no order), one key across pages; MinIO: by
  // initiation alone.
  const guard = new PageGuard("listMultipartUploads", "p/", {
    describe: "s3 test",
    order: "markers",
  });
  guard.check(["p/b", "p/a", "p/b"], { key: "p/b", id: "u9" });
  guard.check(["p/b", "p/b"], { key: "p/b", id: "u1" });
  guard.check(["p/c"], { key: "p/c", id: "u5" });
  guard.check(["p/a"]);
  assert.deepEqual(guard.progress, { pages: 4, keys: 7 });

  const looping = new PageGuard("listMultipartUploads", "p/", {
    describe: "s3 test",
    order: "markers",
  });
  looping.check(["p/a"], { key: "p/a", id: "u1" });
  looping.check(["p/b"], { key: "p/b", id: "u2" });
  const loop = assertThrowsStoreError(() => looping.check(["p/a"], { key: "p/a", id: "u1" }));
  assert.equal(loop.detail.code, "ListingLoop");
  assert.match(loop.message, /the markers repeat those of page 1/);

  const back = new PageGuard("listMultipartUploads", "p/", {
    describe: "s3 test",
    order: "markers",
  });
  back.check(["p/b"], { key: "p/b", id: "u2" });
  const err = assertThrowsStoreError(() => back.check(["p/a"], { key: "p/a", id: "u3" }));
  assert.equal(err.detail.code, "ListingNotAdvancing");
  assert.match(err.message, /marker "p\/a" does not sort after "p\/b"/);
});

function assertThrowsStoreError(fn: () => void): StoreError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof StoreError, String(err));
    return err;
  }
  assert.fail("expected a StoreError");
}
