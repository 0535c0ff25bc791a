// A bounded listing: follows a store's continuation tokens, and stops with a typed error naming
// the store and the prefix when a hostile or broken store would make it endless (a token seen
// before, keys that do not advance, pages without end, no new key for too long). Every paging
// loop in tierd runs its pages through one `PageGuard`.
import { type Clock, systemClock, withTimeout } from "../src/base/clock.ts";
import { compareUtf8 } from "./key_rules.ts";
import { type ObjectInfo, type ObjectStore, StoreError, type StoreErrorKind } from "./types.ts";

/** Limits of one listing (every field has a default). */
export interface ListingBounds {
  /** Pages in all; a listing that needs more fails (`ListingTooLong`). @default 10_000 */
  maxPages?: number;
  /** Keys in all; a listing that yields more fails (`ListingTooLong`). @default 1_000_000 */
  maxKeys?: number;
  /**
   * Consecutive pages without a key that still carry a continuation token; one more fails
   * (`ListingNotAdvancing`). @default 100
   */
  maxEmptyPages?: number;
  /**
   * Time spent waiting on the store since the last new key (the caller's own time between pages
   * does not count); when it runs out the listing fails with `ListingStalled`, a `Transport`
   * error the retry layer may retry: the store is only slow. @default 300_000
   */
  progressTimeoutMs?: number;
  /** The clock the progress timeout runs on. @default systemClock */
  clock?: Clock;
}

/** How far a listing got: pages received and keys accepted. */
export interface ListingProgress {
  pages: number;
  keys: number;
}

/** Options of a {@linkcode PageGuard}. */
export interface PageGuardOptions extends ListingBounds {
  /** Names the store in errors, e.g. "s3 http://127.0.0.1:9000 bucket 'b'". */
  describe: string;
  /**
   * How the listing shows that it advances. `keys`: each key sorts after the one before it,
   * across pages too (object listings). `markers`: the entries may come in any order, and each
   * page's next marker is a {@linkcode ListingMarker} whose key never sorts before the previous
   * one's (S3's ListMultipartUploads: AWS lists uploads by key, then by initiation; MinIO,
   * asked without a prefix, by initiation alone, in one page). @default "keys"
   */
  order?: "keys" | "markers";
  /** Called after each page that passed the checks. */
  onPage?: (progress: ListingProgress) => void;
}

/** Options of {@linkcode listPages} and {@linkcode listBounded}. */
export interface ListingOptions extends ListingBounds {
  signal?: AbortSignal;
  /** Keys asked for per page (the store may send fewer). @default the store's own */
  pageSize?: number;
  /**
   * Names the store in errors, e.g. "s3 http://127.0.0.1:9000 bucket 'b'".
   * @default `${store.kind} store`
   */
  describe?: string;
  /** Called after each page that passed the checks. */
  onPage?: (progress: ListingProgress) => void;
}

/** Where a listing that pages by a marker pair goes on (S3's key and upload-id markers). */
export interface ListingMarker {
  key: string;
  id: string;
}

/** Why a listing stopped: the `detail.code` of its error. */
export type ListingFault =
  | "ListingLoop"
  | "ListingNotAdvancing"
  | "ListingTooLong"
  | "ListingStalled";

const DEFAULTS = {
  maxPages: 10_000,
  maxKeys: 1_000_000,
  maxEmptyPages: 100,
  progressTimeoutMs: 300_000,
} as const;

/**
 * Checks each page of a paged listing as it arrives, and fails the listing — a `StoreError`
 * naming the store, the prefix, the pages and keys so far and the rule — when:
 * - a continuation token (or marker pair) repeats one seen before: `Malformed`, `ListingLoop`;
 * - keys do not advance: each must sort after the one before it, across pages too, in one byte
 *   order throughout — UTF-8 (S3, GCS, fs, sim) or UTF-16 code units (Azure); with `order:
 *   "markers"`, each next marker's key must not sort before the previous one's: `Malformed`,
 *   `ListingNotAdvancing`;
 * - more than `maxEmptyPages` pages in a row have no key but a token: `Malformed`,
 *   `ListingNotAdvancing`;
 * - it needs more than `maxPages` pages or yields more than `maxKeys` keys: `Malformed`,
 *   `ListingTooLong`;
 * - no new key came for `progressTimeoutMs` of waiting on the store: `Transport`,
 *   `ListingStalled`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore();
 * for (const k of ["iggy/a", "iggy/b", "iggy/c"]) await store.put(k, new Uint8Array(1));
 * const prefix = "iggy/";
 * const guard = new PageGuard("list", prefix, { describe: "sim store" });
 * const keys: string[] = [];
 * let token: string | undefined;
 * do {
 *   const page = await guard.request((signal) =>
 *     store.list(prefix, { continuationToken: token, maxKeys: 2, signal })
 *   );
 *   guard.check(page.objects.map((o) => o.key), page.continuationToken);
 *   keys.push(...page.objects.map((o) => o.key));
 *   token = page.continuationToken;
 * } while (token);
 * assert.deepEqual(keys, ["iggy/a", "iggy/b", "iggy/c"]);
 * ```
 */
export class PageGuard {
  readonly #op: string;
  readonly #prefix: string;
  readonly #options: PageGuardOptions;
  readonly #clock: Clock;
  readonly #maxPages: number;
  readonly #maxKeys: number;
  readonly #maxEmptyPages: number;
  readonly #progressTimeoutMs: number;
  readonly #order: "keys" | "markers";
  /** Every token handed out so far, with the page that carried it first. */
  readonly #tokens = new Map<string, number>();
  #pages = 0;
  #keys = 0;
  #emptyRun = 0;
  /** Milliseconds spent waiting on the store since the last new key. */
  #waited = 0;
  /** The last key (of an entry, or of a marker) the order was checked against. */
  #last: string | undefined;
  /** Whether the keys so far rise in UTF-8 byte order, and in UTF-16 code-unit order. */
  #utf8 = true;
  #utf16 = true;

  /**
   * @param op the operation listing, for messages and `detail.op` ("list", "listMultipartUploads")
   * @param prefix the prefix listed, for messages
   */
  constructor(op: string, prefix: string, options: PageGuardOptions) {
    this.#op = op;
    this.#prefix = prefix;
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#maxPages = options.maxPages ?? DEFAULTS.maxPages;
    this.#maxKeys = options.maxKeys ?? DEFAULTS.maxKeys;
    this.#maxEmptyPages = options.maxEmptyPages ?? DEFAULTS.maxEmptyPages;
    this.#progressTimeoutMs = options.progressTimeoutMs ?? DEFAULTS.progressTimeoutMs;
    this.#order = options.order ?? "keys";
  }

  /** Pages received and keys accepted so far. */
  get progress(): ListingProgress {
    return { pages: this.#pages, keys: this.#keys };
  }

  /**
   * Sends one page request, given a signal that aborts with the caller's or when the progress
   * timeout runs out during the request.
   * @param send the request; it should pass the signal on
   * @param signal the caller's signal
   * @returns what `send` returned
   * @throws {StoreError} `Transport` (`ListingStalled`) when the progress timeout ran out
   */
  async request<T>(
    send: (signal: AbortSignal | undefined) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const left = this.#progressTimeoutMs - this.#waited;
    if (left <= 0) throw this.#stalled();
    const started = this.#clock.monotonic();
    try {
      if (!Number.isFinite(left)) return await send(signal);
      const stop = new AbortController();
      const sending = send(signal ? AbortSignal.any([signal, stop.signal]) : stop.signal);
      return await withTimeout(sending, left, () => {
        const err = this.#stalled();
        stop.abort(err);
        return err;
      }, { signal, clock: this.#clock });
    } finally {
      this.#waited += this.#clock.monotonic() - started;
    }
  }

  /**
   * Checks one page.
   * @param keys the keys of the page's entries, in the order the store sent them
   * @param next the page's continuation token, or its marker pair (`order: "markers"`); absent
   *   or empty on the last page
   * @throws {StoreError} when the page breaks a rule (see the class notes)
   */
  check(keys: readonly string[], next?: string | ListingMarker): void {
    this.#pages++;
    const token = typeof next === "object" ? JSON.stringify([next.key, next.id]) : next;
    if (token) {
      const first = this.#tokens.get(token);
      if (first !== undefined) {
        const what = typeof next === "object"
          ? "markers repeat those"
          : "continuation token repeats that";
        throw this.#fail(
          "Malformed",
          "ListingLoop",
          `the ${what} of page ${first} (the store loops)`,
        );
      }
      this.#tokens.set(token, this.#pages);
    }
    for (const key of keys) {
      if (this.#keys >= this.#maxKeys) {
        throw this.#fail("Malformed", "ListingTooLong", `more than ${this.#maxKeys} keys`);
      }
      if (this.#order === "keys") this.#advance(key, "key");
      this.#keys++;
    }
    if (this.#order === "markers" && typeof next === "object") this.#advance(next.key, "marker");
    if (keys.length > 0) {
      this.#emptyRun = 0;
      this.#waited = 0;
    } else if (token && ++this.#emptyRun > this.#maxEmptyPages) {
      throw this.#fail(
        "Malformed",
        "ListingNotAdvancing",
        `${this.#emptyRun} pages in a row without a key, each saying more follow`,
      );
    }
    if (token && this.#pages >= this.#maxPages) {
      throw this.#fail("Malformed", "ListingTooLong", `more than ${this.#maxPages} pages`);
    }
    this.#options.onPage?.(this.progress);
  }

  /** Moves the order on to `key`; a marker's key may repeat, an entry's may not. */
  #advance(key: string, what: "key" | "marker"): void {
    const last = this.#last;
    this.#last = key;
    if (last === undefined || (what === "marker" && key === last)) return;
    // A total order never repeats a key, so holding to one bounds the listing; which one is
    // the store's business (Azure's differs from S3's only around supplementary characters).
    const utf8 = this.#utf8 && compareUtf8(last, key) < 0;
    const utf16 = this.#utf16 && last < key;
    if (!utf8 && !utf16) {
      throw this.#fail(
        "Malformed",
        "ListingNotAdvancing",
        `${what} ${quote(key)} does not sort after ${quote(last)}`,
      );
    }
    this.#utf8 = utf8;
    this.#utf16 = utf16;
  }

  #stalled(): StoreError {
    return this.#fail(
      "Transport",
      "ListingStalled",
      `no new key for ${this.#progressTimeoutMs} ms of waiting on the store`,
    );
  }

  #fail(kind: StoreErrorKind, code: ListingFault, why: string): StoreError {
    return new StoreError(
      kind,
      `${this.#options.describe}: ${this.#op} of prefix ${quote(this.#prefix)} stopped after ` +
        `${this.#pages} pages and ${this.#keys} keys: ${why}`,
      { op: this.#op, code },
    );
  }
}

/**
 * The pages of every key under `prefix`, following continuation tokens within the bounds of
 * {@linkcode PageGuard}: a page is yielded only once it passed the checks.
 * @throws {StoreError} what the store threw, or the guard's error naming the store and prefix
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore();
 * for (const k of ["iggy/a", "iggy/b", "iggy/c"]) await store.put(k, new Uint8Array(1));
 * const seen = new Set<string>();
 * for await (const page of listPages(store, "iggy/", { pageSize: 2, describe: "sim store" })) {
 *   for (const object of page) seen.add(object.key);
 * }
 * assert.equal(seen.size, 3);
 * ```
 */
export async function* listPages(
  store: ObjectStore,
  prefix: string,
  options: ListingOptions = {},
): AsyncGenerator<ObjectInfo[]> {
  const { signal, pageSize, describe, ...bounds } = options;
  const guard = new PageGuard("list", prefix, {
    ...bounds,
    describe: describe ?? `${store.kind} store`,
  });
  let token: string | undefined;
  do {
    const continuationToken = token;
    const page = await guard.request(
      (pageSignal) =>
        store.list(prefix, { continuationToken, maxKeys: pageSize, signal: pageSignal }),
      signal,
    );
    guard.check(page.objects.map((o) => o.key), page.continuationToken);
    token = page.continuationToken;
    yield page.objects;
  } while (token);
}

/**
 * Every key under `prefix`, in the store's order, following continuation tokens within the
 * bounds of {@linkcode PageGuard}.
 * @returns the objects of every page
 * @throws {StoreError} what the store threw, or the guard's error naming the store and prefix
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimStore } from "./sim/store.ts";
 *
 * const store = new SimStore();
 * await store.put("iggy/a", new Uint8Array(1));
 * const objects = await listBounded(store, "iggy/", { describe: "sim store" });
 * assert.deepEqual(objects.map((o) => o.key), ["iggy/a"]);
 * ```
 */
export async function listBounded(
  store: ObjectStore,
  prefix: string,
  options: ListingOptions = {},
): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const page of listPages(store, prefix, options)) {
    for (const object of page) out.push(object);
  }
  return out;
}

/** A key, id or prefix for a message: JSON-quoted, cut short. */
function quote(text: string): string {
  const quoted = JSON.stringify(text);
  return quoted.length <= 80 ? quoted : `${quoted.slice(0, 77)}…"`;
}
