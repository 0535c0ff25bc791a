// One NotFound is not data loss (issue 22): a read of an evicted segment whose store answers
// NotFound for an object it still has — once, at any of the read's GETs, or with a HEAD that
// wavers too — answers the right bytes or "retry" (`StoreUnavailable`), never
// `RemoteObjectMissing`; `tierd_remote_objects_missing_total` stays 0 and no "data loss" line is
// logged. A fault while asking is "retry" too. Only an object really gone (HEAD and listing
// agree) is data loss: counted once, logged once. Through the direct reader and the chunk cache.
import assert from "node:assert/strict";
import { join } from "node:path";
import type { ObjectStore } from "../../providers/types.ts";
import { ChunkCache } from "../../src/cache/chunk_cache.ts";
import type { RangeReader } from "../../src/cache/types.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { RemoteObjectMissing, StoreUnavailable } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { JournalStateReader } from "../../src/read/state_source.ts";
import { capturingLogger, type LogLine } from "../_model/tier_harness.ts";
import { exactly, type Waver, waveringStore } from "../_wavering_store.ts";
import { buildScenario, expectedRead, type Scenario } from "./_scenario.ts";

const DATA_LOSS = "remote object missing: data loss";
const MAX = 1 << 20;

type ReaderKind = "direct" | "chunk cache";

/** A read context over a wavering view of the scenario's store, with metrics and log lines. */
async function reading(s: Scenario, kind: ReaderKind, store: ObjectStore) {
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const { logger, lines } = capturingLogger("info");
  let reader: RangeReader | undefined;
  let cache: ChunkCache | undefined;
  if (kind === "chunk cache") {
    cache = await ChunkCache.open(store, {
      path: join(s.dir, `cache-${crypto.randomUUID()}`),
      chunkSize: 16 * 1024,
      size: 1 << 30,
      sizePercent: 100,
      diskTotalBytes: 2 ** 40,
      persistInterval: Infinity,
      firstFetch: false,
    });
    reader = cache;
  }
  const ctx = s.context({ store, reader, metrics, logger });
  return {
    read: (offset: bigint) => readRecords(ctx, { partition: s.ids, offset, maxBytes: MAX }),
    missing: () => {
      const m = /^tierd_remote_objects_missing_total (\d+)$/m.exec(registry.render());
      return Number(m?.[1] ?? "NaN");
    },
    lines,
    close: async () => await cache?.close(),
  };
}

/** The `.log` key of evicted segment `start`. */
async function logKey(s: Scenario, start: bigint): Promise<string> {
  const state = (await new JournalStateReader(s.config.agent.state_dir).state(s.ids))!;
  return segmentKeys({
    prefix: "iggy",
    clusterId: s.config.agent.cluster_id,
    ...s.ids,
    incarnation: state.incarnation!,
    generation: state.generation,
  }, start).log;
}

function dataLoss(lines: readonly LogLine[]): LogLine[] {
  return lines.filter((l) => l.msg === DATA_LOSS);
}

async function scenario(): Promise<Scenario> {
  const s = await buildScenario({
    format: "iggy-0.9",
    before: 400,
    after: 10,
    // Larger than a read's window (64 KiB): a read GETs the object while it walks the records
    // and again while it streams them.
    segmentSize: 96 * 1024,
    payloadSize: 1000,
    evict: 3,
  });
  assert.equal(s.evicted.length, 3, "three segments evicted");
  return s;
}

for (const kind of ["direct", "chunk cache"] as const) {
  Deno.test(`${kind}: one NotFound at any GET of a read answers the right bytes or retry, never data loss`, async () => {
    const s = await scenario();
    try {
      const start = s.evicted[1];
      const key = await logKey(s, start);
      const want = expectedRead(s.records, { offset: start }, MAX)!;
      // How many GETs of the object a clean read makes: each is the one that wavers, in turn.
      const clean = waveringStore(s.store);
      const probe = await reading(s, kind, clean.store);
      assert.deepEqual((await probe.read(start)).bytes, want.bytes);
      await probe.close();
      const gets = clean.calls.filter((c) => c.op === "get" && c.key === key).length;
      assert.ok(gets >= 1, "the read GETs the evicted segment's object");
      const outcomes: string[] = [];
      for (let skip = 0; skip < gets; skip++) {
        const w = waveringStore(s.store);
        w.waver({ op: "get", key: exactly(key), times: 1, skip });
        const r = await reading(s, kind, w.store);
        try {
          const got = await r.read(start).then(
            (res) => res,
            (err) => err as Error,
          );
          assert.equal(w.failed, 1, `GET ${skip + 1} of ${gets} wavered`);
          if (got instanceof Error) {
            assert.ok(
              got instanceof StoreUnavailable,
              `GET ${skip + 1}: ${got.name}: ${got.message}`,
            );
            outcomes.push("retry");
            // Asked again, the store (healed) answers it whole.
            assert.deepEqual((await r.read(start)).bytes, want.bytes);
          } else {
            assert.deepEqual(got.bytes, want.bytes, `GET ${skip + 1}: the bytes`);
            outcomes.push("ok");
          }
          assert.equal(r.missing(), 0, `GET ${skip + 1}: counted as data loss`);
          assert.deepEqual(dataLoss(r.lines), [], `GET ${skip + 1}: logged as data loss`);
          // The absence was asked about before anything was said.
          assert.ok(w.calls.some((c) => c.op === "head" && c.key === key), "a HEAD confirmed it");
        } finally {
          await r.close();
        }
      }
      assert.ok(outcomes.includes("ok"), `the first GET's NotFound is read again: ${outcomes}`);
      console.log(`${gets} GET(s) of the object per read; one NotFound at each: ${outcomes}`);
    } finally {
      await s.cleanup();
    }
  });
}

Deno.test("a store that wavers more: NotFound on GET and HEAD, the listing shows it; or GET NotFound every time while HEAD finds it; or a fault while asking — retry, never data loss", async () => {
  const s = await scenario();
  try {
    const start = s.evicted[0];
    const key = await logKey(s, start);
    const want = expectedRead(s.records, { offset: start }, MAX)!;
    const cases: { name: string; wavers: Waver[]; ok: boolean }[] = [
      {
        name: "GET and HEAD NotFound once, listed",
        wavers: [
          { op: "get", key: exactly(key), times: 1 },
          { op: "head", key: exactly(key), times: 1 },
        ],
        ok: true,
      },
      {
        name: "GET NotFound every time, HEAD finds it",
        wavers: [{ op: "get", key: exactly(key), times: 1_000 }],
        ok: false,
      },
      {
        name: "GET NotFound, HEAD a transport fault",
        wavers: [
          { op: "get", key: exactly(key), times: 1 },
          { op: "head", key: exactly(key), times: 1_000, kind: "Transport" },
        ],
        ok: false,
      },
      {
        name: "GET and HEAD NotFound, the listing a transport fault",
        wavers: [
          { op: "get", key: exactly(key), times: 1 },
          { op: "head", key: exactly(key), times: 1 },
          { op: "list", key: (k) => key.startsWith(k), times: 1_000, kind: "Transport" },
        ],
        ok: false,
      },
    ];
    for (const c of cases) {
      const w = waveringStore(s.store);
      for (const x of c.wavers) w.waver(x);
      const r = await reading(s, "direct", w.store);
      const got = await r.read(start).then((res) => res, (err) => err as Error);
      if (c.ok) {
        assert.ok(!(got instanceof Error), `${c.name}: ${got}`);
        assert.deepEqual(got.bytes, want.bytes, c.name);
      } else {
        assert.ok(got instanceof StoreUnavailable, `${c.name}: ${got}`);
      }
      assert.equal(r.missing(), 0, `${c.name}: counted as data loss`);
      assert.deepEqual(dataLoss(r.lines), [], `${c.name}: logged as data loss`);
    }
  } finally {
    await s.cleanup();
  }
});

Deno.test("an object really gone: RemoteObjectMissing, counted once and logged once", async () => {
  const s = await scenario();
  try {
    const start = s.evicted.at(-1)!;
    const key = await logKey(s, start);
    assert.deepEqual(await s.store.deleteMany([key]), []);
    const w = waveringStore(s.store);
    const r = await reading(s, "direct", w.store);
    await assert.rejects(r.read(start), (err) => {
      assert.ok(err instanceof RemoteObjectMissing, String(err));
      assert.equal(err.key, key);
      return true;
    });
    assert.equal(r.missing(), 1);
    const lost = dataLoss(r.lines);
    assert.equal(lost.length, 1, JSON.stringify(r.lines));
    assert.equal(lost[0].key, key);
    assert.ok(w.calls.some((c) => c.op === "head" && c.key === key), "confirmed by a HEAD");
    assert.ok(w.calls.some((c) => c.op === "list" && key.startsWith(c.key)), "and a listing");
  } finally {
    await s.cleanup();
  }
});
