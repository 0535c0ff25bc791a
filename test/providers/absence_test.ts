// `confirmAbsent` (providers/absence.ts), over a store whose HEAD and listing answers are
// scripted: an object is called gone only when a HEAD says NotFound and a listing of its key
// does not show it; either finding it says "there"; a fault while asking is thrown as it is,
// never taken for an absence.
import assert from "node:assert/strict";
import { confirmAbsent } from "../../providers/absence.ts";
import { SimStore } from "../../providers/sim/store.ts";
import {
  type HeadOptions,
  type ListOptions,
  type ListPage,
  type ObjectHead,
  StoreError,
  type StoreErrorKind,
} from "../../providers/types.ts";
import { rejectsWith } from "./_faults.ts";

const KEY = "iggy/local/3/1/0/00000000000000000001-0/00000000000000000000.log";

/** What a scripted call answers: found, NotFound, or a fault of a kind. */
type Said = "found" | "absent" | StoreErrorKind;

/** A sim store holding `KEY`, whose HEAD and listing answer as scripted, counting the calls. */
class ScriptedStore extends SimStore {
  heads = 0;
  lists: { prefix: string; maxKeys?: number }[] = [];
  constructor(
    readonly onHead: Said,
    readonly onList: Said,
    /** Keys the listing shows beside `KEY` when it shows it (or instead of it). */
    readonly siblings: string[] = [],
  ) {
    super();
  }

  override async head(key: string, options?: HeadOptions): Promise<ObjectHead> {
    this.heads++;
    if (this.onHead === "found") return await super.head(key, options);
    throw fault(this.onHead, "head", key);
  }

  override list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    this.lists.push({ prefix, maxKeys: options.maxKeys });
    if (this.onList !== "found" && this.onList !== "absent") {
      return Promise.reject(fault(this.onList, "list", prefix));
    }
    const keys = [...(this.onList === "found" ? [KEY] : []), ...this.siblings]
      .filter((k) => k.startsWith(prefix)).sort();
    const limit = options.maxKeys ?? 1000;
    return Promise.resolve({
      objects: keys.slice(0, limit).map((key) => ({ key, size: 3 })),
      ...(keys.length > limit && { continuationToken: "more" }),
    });
  }
}

function fault(kind: Said, op: string, key: string): StoreError {
  const k = kind === "absent" ? "NotFound" : kind as StoreErrorKind;
  return new StoreError(k, `${op} ${key}: scripted ${k}`, { op, key });
}

async function storeWith(onHead: Said, onList: Said, siblings?: string[]) {
  const s = new ScriptedStore(onHead, onList, siblings);
  await s.put(KEY, new Uint8Array([1, 2, 3]));
  return s;
}

Deno.test("confirmAbsent: a HEAD that finds the object says it is there, without a listing", async () => {
  const s = await storeWith("found", "absent");
  assert.equal(await confirmAbsent(s, KEY), false);
  assert.equal(s.heads, 1);
  assert.deepEqual(s.lists, [], "no listing once the HEAD found it");
});

Deno.test("confirmAbsent: HEAD NotFound but the listing shows the key: there (the store wavered)", async () => {
  const s = await storeWith("absent", "found");
  assert.equal(await confirmAbsent(s, KEY), false);
  assert.equal(s.heads, 1);
  assert.equal(s.lists.length, 1);
  assert.equal(s.lists[0].prefix, KEY, "the listing asks about the key itself");
});

Deno.test("confirmAbsent: HEAD NotFound and no listing entry for the key: gone", async () => {
  const s = await storeWith("absent", "absent");
  assert.equal(await confirmAbsent(s, KEY), true);
  assert.equal(s.heads, 1);
  assert.equal(s.lists.length, 1);
  // A longer key that shares the prefix (the .log's neighbour `….log.tmp`, say) is not the object.
  const sibling = await storeWith("absent", "absent", [`${KEY}.tmp`]);
  assert.equal(await confirmAbsent(sibling, KEY), true, "a key sharing the prefix is not it");
});

Deno.test("confirmAbsent: a fault while asking is thrown, never taken for an absence", async () => {
  const cases: { head: Said; list: Said; kind: StoreErrorKind }[] = [
    { head: "Transport", list: "absent", kind: "Transport" },
    { head: "Throttled", list: "absent", kind: "Throttled" },
    { head: "Auth", list: "absent", kind: "Auth" },
    { head: "absent", list: "Transport", kind: "Transport" },
    { head: "absent", list: "Throttled", kind: "Throttled" },
    { head: "absent", list: "Malformed", kind: "Malformed" },
  ];
  for (const c of cases) {
    const s = await storeWith(c.head, c.list);
    await rejectsWith(confirmAbsent(s, KEY), c.kind, (err) => {
      assert.ok(err.message.includes("scripted"), `HEAD ${c.head}, list ${c.list}: ${err}`);
    });
    if (c.head !== "absent") assert.deepEqual(s.lists, [], "no listing after a HEAD fault");
  }
});

Deno.test("confirmAbsent: a cancelled call is not an absence either", async () => {
  // Nothing under the key: asked to the end, the answer would be "gone". Cancelled, it is none.
  const store = new SimStore();
  const stop = new AbortController();
  stop.abort(new DOMException("stopped", "AbortError"));
  await assert.rejects(confirmAbsent(store, KEY, { signal: stop.signal }));
  assert.equal(await confirmAbsent(store, KEY), true, "not cancelled: gone");
});
