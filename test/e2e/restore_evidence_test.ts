// `tierd restore` decides by evidence, never by date, and restores every good segment (issue 22),
// through the real CLI against MinIO (and the fs store where noted). One source host tiers and
// evicts two partitions of generated segments (iggy-0.9 and iggy-0.8); each case copies the
// source's key space (owner record, manifests, objects with their metadata) to a key space of
// its own, damages it with the test's own store client, and restores onto fresh hosts:
// - another incarnation (a copy of the partition's, or of the other partition's) or a higher
//   generation planted with a later LastModified: never the planted bytes; exit 1 naming both
//   candidates, the other partition restored; naming the real one restores it byte-identical;
// - a newer incarnation holding only the first 2 of 6 segments: competing, nothing restored;
// - a `.log` deleted from the middle (MinIO and fs, with and without data): exit 1 naming the
//   hole, every other segment restored; the agent on that host reads the hole as a gap, never
//   `offset_past_end`, never logs a purge or a loss, keeps the local copies after the hole; then
//   `--accept-holes` records the loss and exits 0; the last sealed `.log` deleted (nothing follows
//   the hole): a read inside it answers 410 `offset_gap`, never `offset_past_end`;
// - a `.log` whose HEAD size, checksum metadata or bytes lie: that segment is a hole with its
//   reason, every other segment and the other partition restored, exit 1;
// - a listing whose continuation token repeats or grows: restore exits non-zero promptly,
//   naming the store and the prefix, and writes no journal.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FsStore } from "../../providers/fs/store.ts";
import { type ObjectStore } from "../../providers/types.ts";
import { parseConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/schema.ts";
import { appendMessages, generatePartition, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { segmentKeys } from "../../src/layout/object_keys.ts";
import {
  incarnationHex,
  type PartitionId,
  partitionLabel,
  segmentStem,
} from "../../src/layout/partition.ts";
import { journalPath, partitionStateDir } from "../../src/layout/state_paths.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { fold, getSegment, type PartitionState } from "../../src/state/segment_state.ts";
import { scratchDir } from "../_model/tier_harness.ts";
import {
  minioAvailable,
  minioStore,
  runTierd,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { type ListingLoopMode, startListingLoopProxy } from "./_listing_loop_proxy.ts";
import {
  type Api,
  concat,
  equalBytes,
  KiB,
  readEverything,
  recoveryConfigText,
  runAgentOn,
} from "./_recovery.ts";

const STREAM = 3;
const TOPIC = 1;
const P0: PartitionId = { stream: STREAM, topic: TOPIC, partition: 0 };
const P1: PartitionId = { stream: STREAM, topic: TOPIC, partition: 1 };
const PARTITIONS: { id: PartitionId; format: FormatName }[] = [
  { id: P0, format: "iggy-0.9" },
  { id: P1, format: "iggy-0.8" },
];
const SEGMENT_SIZE = 16 * KiB;
/** Six sealed segments of each format at 16 KiB (and an empty active one). */
const MESSAGES = 500;
const CLUSTER = "local";

/** What the source host wrote and tiered, per partition. */
interface SourcePartition {
  id: PartitionId;
  /** Every file of the broker's partition directory, by name. */
  files: Map<string, Uint8Array>;
  /** Start offsets of the sealed segments (all in the bucket), oldest first. */
  sealed: bigint[];
  /** The `.log` bytes of each sealed segment. */
  logs: Map<bigint, Uint8Array>;
  /** Where the (empty) active segment starts: one past the last sealed offset. */
  next: bigint;
  incarnation: bigint;
  generation: bigint;
}

/** A key space holding a copy of the source's: MinIO under its own prefix, or an fs store. */
interface Bucket {
  kind: "minio" | "fs";
  store: ObjectStore;
  prefix: string;
  /** The fs store's directory. */
  path?: string;
}

/** A fresh host: its config (broker, state, cache under its root). */
interface Host {
  root: string;
  configPath: string;
  env: Record<string, string>;
  config: Config;
  dirOf(id: PartitionId): string;
}

type Restore = Awaited<ReturnType<typeof runTierd>>;

if (await minioAvailable("restore-by-evidence tests against MinIO")) {
  Deno.test("tierd restore by evidence from MinIO and fs: planted and truncated incarnations compete, holes are reported and read as gaps, lying objects are holes, endless listings fail", async (t) => {
    await initHashes();
    const minio = (await startMinioReady())!;
    const s3 = minioStore(minio);
    const tmp = await scratchDir("tierd-restore-evidence");
    const stores: ObjectStore[] = [];
    try {
      const source = await sourceHost(tmp.path, minio);
      const [s0, s1] = [source.get(partitionLabel(P0))!, source.get(partitionLabel(P1))!];

      /** A copy of the source's key space, to damage. */
      const bucket = async (name: string, kind: "minio" | "fs"): Promise<Bucket> => {
        let b: Bucket;
        if (kind === "minio") b = { kind, store: s3, prefix: name };
        else {
          const path = join(tmp.path, `${name}-bucket`);
          const store = new FsStore({ root: path });
          stores.push(store);
          b = { kind, store, prefix: "iggy", path };
        }
        await copyKeySpace(s3, "src", b.store, b.prefix);
        return b;
      };
      const host = (name: string, b: Bucket, endpoint?: string) =>
        makeHost(join(tmp.path, name), minio, b, endpoint);
      const logKey = (b: Bucket, s: SourcePartition, start: bigint, over?: Partial<Loc>) =>
        keysOf(b, s, start, over).log;

      /** Restore that names exactly two candidates for P0 and restores P1, then the named one. */
      const plantedCase = async (
        name: string,
        planted: Loc,
        plant: (b: Bucket) => Promise<void>,
        kind: "minio" | "fs" = "minio",
      ) => {
        const b = await bucket(name, kind);
        await plant(b);
        const h = await host(`${name}-host`, b);
        const r = await restoreOn(h, "--with-data");
        assert.equal(r.code, 1, r.stderr);
        assertCompeting(r, P0, [s0, planted]);
        await assertNothingWritten(h, P0);
        assert.match(r.stderr, restoredLine(P1, s1.sealed.length), r.stderr);
        await assertRestoredFiles(h, s1);
        assert.match(r.stderr, /^restore INCOMPLETE: /m);
        // Naming the real one on another fresh host restores it, byte-identical.
        const named = await host(`${name}-named`, b);
        const n = await restoreOn(
          named,
          "--with-data",
          ...partitionFlags(P0),
          "--incarnation",
          incarnationHex(s0.incarnation),
          "--generation",
          String(s0.generation),
        );
        assert.equal(n.code, 0, n.stderr);
        assert.match(
          n.stderr,
          new RegExp(
            `restored ${label(P0)} \\(incarnation ${incarnationHex(s0.incarnation)} generation ` +
              `${s0.generation}, named by the operator\\): ${s0.sealed.length} segments`,
          ),
          n.stderr,
        );
        assert.match(n.stderr, /^restore complete: /m);
        await assertRestoredFiles(named, s0);
      };

      await t.step(
        "planted incarnation (a copy of the partition's own) is never restored: exit 1, both candidates listed, the other partition restored; the named one restores byte-identical",
        async () => {
          const planted = { incarnation: randomIncarnation(), generation: s0.generation };
          await plantedCase("planted-own", planted, async (b) => {
            for (const start of s0.sealed) {
              await copySegment(b, keysOf(b, s0, start), keysOf(b, s0, start, planted));
            }
          });
        },
      );

      await t.step(
        "planted incarnation, fs store: the same",
        async () => {
          const planted = { incarnation: randomIncarnation(), generation: s0.generation };
          await plantedCase("planted-own-fs", planted, async (b) => {
            for (const start of s0.sealed) {
              await copySegment(b, keysOf(b, s0, start), keysOf(b, s0, start, planted));
            }
          }, "fs");
        },
      );

      await t.step(
        "planted incarnation holding the other partition's bytes: the same",
        async () => {
          const planted = { incarnation: randomIncarnation(), generation: s0.generation };
          await plantedCase("planted-other", planted, async (b) => {
            for (const start of s1.sealed) {
              await copySegment(b, keysOf(b, s1, start), keysOf(b, s0, start, planted));
            }
          });
        },
      );

      await t.step(
        "a higher generation of the real incarnation, planted with the other partition's bytes: the same",
        async () => {
          const planted = { incarnation: s0.incarnation, generation: s0.generation + 1n };
          await plantedCase("planted-generation", planted, async (b) => {
            for (const start of s1.sealed) {
              await copySegment(b, keysOf(b, s1, start), keysOf(b, s0, start, planted));
            }
          });
        },
      );

      /** A newer incarnation holding only the first 2 of 6 segments, with its manifest. */
      const truncatedCase = async (kind: "minio" | "fs") => {
        assert.equal(s0.sealed.length, 6);
        const b = await bucket(`truncated-${kind}`, kind);
        const planted = { incarnation: randomIncarnation(), generation: s0.generation };
        for (const start of s0.sealed.slice(0, 2)) {
          await copySegment(b, keysOf(b, s0, start), keysOf(b, s0, start, planted));
        }
        // Its manifest, by the same owner, listing those two.
        const real = manifestKeyOf(b, s0);
        const m = JSON.parse(new TextDecoder().decode((await b.store.get(real)).bytes));
        m.incarnation = incarnationHex(planted.incarnation);
        m.segments = m.segments.slice(0, 2);
        m.written_at = new Date().toISOString();
        await b.store.put(
          manifestKeyOf(b, { ...s0, ...planted }),
          new TextEncoder().encode(JSON.stringify(m)),
        );
        const h = await host(`truncated-${kind}-host`, b);
        const r = await restoreOn(h, "--with-data");
        assert.equal(r.code, 1, r.stderr);
        const lines = assertCompeting(r, P0, [s0, planted]);
        assert.match(lines.get(incarnationHex(planted.incarnation))!, /\b2 segment object\(s\)/);
        assert.match(lines.get(incarnationHex(s0.incarnation))!, /\b6 segment object\(s\)/);
        await assertNothingWritten(h, P0);
        assert.doesNotMatch(r.stderr, new RegExp(`^restored ${label(P0)}`, "m"));
        assert.match(r.stderr, restoredLine(P1, s1.sealed.length), r.stderr);
        await assertRestoredFiles(h, s1);
      };

      for (const kind of ["minio", "fs"] as const) {
        await t.step(
          `${kind}: a newer incarnation holding only the first 2 of 6 segments (with its manifest): exit 1, both candidates listed, nothing restored with 2 segments`,
          () => truncatedCase(kind),
        );
      }

      /**
       * A `.log` deleted from the bucket (the third segment's, or the last's: nothing follows);
       * restore, the agent on the restored host, then --accept-holes.
       */
      const holeCase = async (
        kind: "minio" | "fs",
        withData: boolean,
        where: "middle" | "last",
      ) => {
        const name = `hole-${where}-${kind}-${withData ? "data" : "state"}`;
        const b = await bucket(name, kind);
        const at = where === "middle" ? 2 : s0.sealed.length - 1;
        const from = s0.sealed[at];
        const to = (s0.sealed[at + 1] ?? s0.next) - 1n;
        const before = s0.sealed.filter((s) => s < from);
        const after = s0.sealed.filter((s) => s > from);
        assert.deepEqual(await b.store.deleteMany([logKey(b, s0, from)]), []);
        const h = await host(`${name}-host`, b);
        const flags = withData ? ["--with-data"] : [];
        const r = await restoreOn(h, ...flags);
        assert.equal(r.code, 1, r.stderr);
        assert.match(
          r.stderr,
          new RegExp(`^  hole in ${label(P0)}: offsets ${from}\\.\\.${to}: .*missing`, "m"),
          r.stderr,
        );
        assert.match(
          r.stderr,
          new RegExp(
            `^restored ${label(P0)} \\([^)]*\\): ${s0.sealed.length - 1} segments .*; 1 HOLE`,
            "m",
          ),
          r.stderr,
        );
        assert.match(r.stderr, restoredLine(P1, s1.sealed.length), r.stderr);
        assert.match(r.stderr, /^restore INCOMPLETE: /m);
        const holeState = getSegment(await journalState(h, P0), s0.generation, from);
        assert.equal(holeState?.state, "HOLE", `the journal at ${from}: ${holeState?.state}`);
        if (withData) {
          // Nothing says where the broker may go on past a hole at the end: no empty segment.
          assert.match(
            r.stderr,
            after.length > 0
              ? new RegExp(`^  ${label(P0)}: an empty segment at offset ${s0.next} after the `, "m")
              : new RegExp(`^  ${label(P0)}: no empty segment after the restored ones`, "m"),
            r.stderr,
          );
          await assertRestoredFiles(h, s0, [from]);
          await assertRestoredFiles(h, s1);
        } else {
          // The host's new broker starts empty; `tierd run` wants its data dir to exist.
          await mkdir(join(h.config.agent.data_dir, "streams"), { recursive: true });
        }

        const agent = await runAgentOn(h);
        let stopped: Deno.CommandStatus | undefined;
        try {
          await agent.process.waitFor((l) => l.msg === "first pass done", 30_000);
          const api = agent.api;
          const afterHole = concat(after.map((s) => s0.logs.get(s)!));
          for (const offset of [from, from + (to - from) / 2n, to]) {
            const res = await api(recordsPath(P0, offset));
            const body = new Uint8Array(await res.arrayBuffer());
            const what = `offset ${offset}: ${res.status} ${text(body)}`;
            assert.equal(res.headers.get("x-tierd-gap"), `${from}-${to}`, what);
            if (after.length > 0) {
              // Inside the hole: answered from the first offset after it, the hole named.
              assert.equal(res.status, 200, what);
              assert.equal(res.headers.get("x-tierd-first-offset"), String(to + 1n));
              assert.ok(equalBytes(body, afterHole.subarray(0, body.length)), what);
            } else {
              // Nothing follows: a gap, not "past the end".
              assert.equal(res.status, 410, what);
              assert.equal(JSON.parse(text(body)).error, "offset_gap", what);
            }
          }
          // From 0 to the end: every other segment byte-identical, the one gap reported.
          const all = await readAcross(api, P0);
          assert.deepEqual(all.gaps, [{
            asked: from,
            gap: `${from}-${to}`,
            first: after.length > 0 ? to + 1n : -1n,
          }]);
          assert.equal(all.end, after.length > 0 ? "offset_past_end" : "offset_gap");
          const want = concat([...before, ...after].map((s) => s0.logs.get(s)!));
          assert.equal(all.bytes.length, want.length, "bytes read around the hole");
          assert.ok(equalBytes(all.bytes, want), "the bytes read around the hole differ");
          // The other partition: every offset, no gap.
          const other = await readEverything(api, P1);
          assert.ok(equalBytes(other.bytes, concat(s1.sealed.map((s) => s1.logs.get(s)!))));
          assert.match(
            await (await api("/metrics")).text(),
            /^tierd_segments_lost_before_upload_total 0$/m,
          );
          if (withData && after.length > 0) {
            // Eviction is configured (two segments' worth kept) and evicted the copies before
            // the hole; the floor stops at the hole, so every restored copy after it stays, and
            // the empty active segment restore put after them.
            const local = await logsIn(h.dirOf(P0));
            assert.deepEqual(local, [...after, s0.next], "local segments after the first pass");
          }
        } finally {
          stopped = await agent.stop();
        }
        const output = agent.process.output();
        assert.equal(stopped.code, 0, output.slice(-3000));
        const said = agent.process.lines.map((l) => l.msg);
        assert.ok(!said.some((m) => /partition was purged/.test(m)), output.slice(-3000));
        assert.ok(
          !said.some((m) => /offsets deleted by the broker before they were copied/.test(m)),
          output.slice(-3000),
        );

        // The operator records the loss: exit 0, the hole journaled as lost.
        const accepted = await restoreOn(h, ...flags, "--accept-holes");
        assert.equal(accepted.code, 0, accepted.stderr);
        assert.match(accepted.stderr, /1 HOLE\(S\), 1 recorded lost/, accepted.stderr);
        assert.match(accepted.stderr, /^restore complete: /m);
        const lost = getSegment(await journalState(h, P0), s0.generation, from);
        assert.equal(lost?.state, "LOST_BEFORE_UPLOAD", `the journal at ${from}: ${lost?.state}`);
      };

      for (const kind of ["minio", "fs"] as const) {
        for (const withData of [true, false]) {
          await t.step(
            `a .log deleted from the middle (${kind}, ${
              withData ? "with" : "without"
            } --with-data): exit 1 naming the hole, every other segment restored; the agent reads it as a gap; --accept-holes records the loss`,
            () => holeCase(kind, withData, "middle"),
          );
        }
      }
      for (const withData of [true, false]) {
        await t.step(
          `the last sealed .log deleted (minio, ${
            withData ? "with" : "without"
          } --with-data): the hole named; a read inside it answers 410 offset_gap, never offset_past_end`,
          () => holeCase("minio", withData, "last"),
        );
      }

      /** A lying `.log` at P0's third segment: a hole with its reason, the rest restored. */
      const lyingCase = async (
        name: string,
        lie: (b: Bucket, key: string) => Promise<void>,
        reason: RegExp,
        kind: "minio" | "fs" = "minio",
      ) => {
        const b = await bucket(name, kind);
        const at = 2;
        const from = s0.sealed[at];
        const to = s0.sealed[at + 1] - 1n;
        await lie(b, logKey(b, s0, from));
        const h = await host(`${name}-host`, b);
        const r = await restoreOn(h, "--with-data");
        assert.equal(r.code, 1, r.stderr);
        const m = new RegExp(`^  hole in ${label(P0)}: offsets ${from}\\.\\.${to}: (.*)$`, "m")
          .exec(r.stderr);
        assert.ok(m, r.stderr);
        assert.match(m[1], reason);
        assert.match(
          r.stderr,
          new RegExp(
            `^restored ${label(P0)} \\([^)]*\\): ${s0.sealed.length - 1} segments .*; 1 HOLE`,
            "m",
          ),
          r.stderr,
        );
        assert.match(r.stderr, restoredLine(P1, s1.sealed.length), r.stderr);
        assert.match(r.stderr, /^restore INCOMPLETE: /m);
        await assertRestoredFiles(h, s0, [from]);
        await assertRestoredFiles(h, s1);
      };

      await t.step(
        "a .log whose HEAD size disagrees with its metadata: a hole with its reason, the rest restored, exit 1",
        () =>
          lyingCase("lie-size", async (b, key) => {
            const head = await b.store.head(key);
            const bytes = (await b.store.get(key)).bytes;
            const metadata = { ...head.metadata, size: String(bytes.length + 7) };
            await b.store.put(key, bytes, { metadata });
          }, /object is \d+ bytes, metadata says \d+/),
      );

      await t.step(
        "a .log whose xxh3-128 metadata is wrong: a hole with its reason, the rest restored, exit 1",
        () =>
          lyingCase("lie-checksum", async (b, key) => {
            const head = await b.store.head(key);
            const bytes = (await b.store.get(key)).bytes;
            const sum = head.metadata["xxh3-128"];
            const metadata = {
              ...head.metadata,
              "xxh3-128": (sum[0] === "0" ? "1" : "0") + sum.slice(1),
            };
            await b.store.put(key, bytes, { metadata });
          }, /hash to [0-9a-f]{32}, the object's metadata says [0-9a-f]{32}/),
      );

      await t.step(
        "a .log whose bytes are another segment's (its own metadata kept): a hole with its reason, the rest restored, exit 1",
        () =>
          lyingCase("lie-bytes", async (b, key) => {
            const victim = s0.sealed[2];
            // Another segment of the same size, when there is one: only the bytes tell.
            const size = s0.logs.get(victim)!.length;
            const other = s0.sealed.find((s) => s !== victim && s0.logs.get(s)!.length === size) ??
              s0.sealed[0];
            const head = await b.store.head(key);
            const bytes = (await b.store.get(logKey(b, s0, other))).bytes;
            await b.store.put(key, bytes, { metadata: head.metadata });
          }, /hash to [0-9a-f]{32}, the object's metadata says|object is \d+ bytes, metadata says/),
      );

      await t.step(
        "fs store: a .log whose HEAD size lies, and one whose bytes are another segment's: holes with their reasons, the rest restored, exit 1",
        async () => {
          await lyingCase(
            "lie-size-fs",
            async (b, key) => {
              const head = await b.store.head(key);
              const bytes = (await b.store.get(key)).bytes;
              await b.store.put(key, bytes, {
                metadata: { ...head.metadata, size: String(bytes.length + 7) },
              });
            },
            /object is \d+ bytes, metadata says \d+/,
            "fs",
          );
          await lyingCase(
            "lie-bytes-fs",
            async (b, key) => {
              const head = await b.store.head(key);
              const other = s0.sealed[0];
              const bytes = (await b.store.get(logKey(b, s0, other))).bytes;
              await b.store.put(key, bytes, { metadata: head.metadata });
            },
            /hash to [0-9a-f]{32}, the object's metadata says|object is \d+ bytes, metadata says/,
            "fs",
          );
        },
      );

      const loopCase = async (mode: ListingLoopMode) => {
        const name = `loop-${mode.replace(/[^a-z]+/g, "-")}`;
        const b = await bucket(name, "minio");
        const root = `${b.prefix}/${CLUSTER}/`;
        const owner = await b.store.get(`${root}owner.json`);
        const proxy = await startListingLoopProxy(minio.endpoint, {
          bucket: minio.bucket,
          prefix: root,
          mode,
        });
        try {
          const h = await host(`${name}-host`, b, proxy.endpoint);
          const child = spawnTierd(["restore", "--with-data", "--config", h.configPath], h.env);
          // A failure guard, not a measured duration: a restore that hangs never exits.
          let guard: ReturnType<typeof setTimeout> | undefined;
          const status = await Promise.race([
            child.status,
            new Promise<undefined>((resolve) =>
              guard = setTimeout(() => resolve(undefined), 60_000)
            ),
          ]);
          clearTimeout(guard);
          if (status === undefined) {
            child.kill("SIGKILL");
            await child.status;
            assert.fail(
              `restore still running after 60 s against a ${mode} listing (${proxy.pages} ` +
                `pages served); output tail:\n${child.output().slice(-3000)}`,
            );
          }
          const output = child.output();
          assert.notEqual(status.code, 0, output.slice(-3000));
          const port = new URL(proxy.endpoint).port;
          // The prefix listed: the cluster root (or one under it).
          const error = output.split("\n").find((l) => l.includes(`prefix "${root}`)) ?? "";
          assert.ok(error, `no line names the prefix ${root}:\n${output.slice(-3000)}`);
          assert.match(error, new RegExp(`127\\.0\\.0\\.1:${port}.* bucket '${minio.bucket}'`));
          assert.match(error, /repeats|does not sort after|without a key/);
          assert.ok(proxy.pages < 1000, `${proxy.pages} pages listed before it stopped`);
          assert.deepEqual(await journalsUnder(h.config.agent.state_dir), [], "journals written");
          // Nothing was taken over either: the owner record is the source's.
          const now = await b.store.get(`${root}owner.json`);
          assert.ok(equalBytes(now.bytes, owner.bytes), "the owner record changed");
        } finally {
          await proxy.close();
        }
      };

      await t.step(
        "a listing whose continuation token repeats: restore exits non-zero, naming the store and the prefix; no journal",
        () => loopCase("repeating token"),
      );
      await t.step(
        "a listing whose token keeps growing while the keys do not advance: the same",
        () => loopCase("growing token, same keys"),
      );
      await t.step(
        "a listing whose token keeps growing over empty pages: the same",
        () => loopCase("growing token, empty pages"),
      );
    } finally {
      for (const s of stores) await s.close?.();
      await s3.close();
      await minio.stop();
      await tmp.cleanup();
    }
  });
}

/**
 * The source host: two partitions of generated segments, every message in a sealed segment (the
 * active one empty), tiered and evicted by `tierd run --once` into MinIO under prefix `src`.
 */
async function sourceHost(
  tmp: string,
  minio: MinioServer,
): Promise<Map<string, SourcePartition>> {
  const b: Bucket = { kind: "minio", store: minioStore(minio), prefix: "src" };
  const src = await makeHost(join(tmp, "source"), minio, b);
  const out = new Map<string, SourcePartition>();
  for (const { id, format } of PARTITIONS) {
    const gen = {
      format,
      dataDir: src.config.agent.data_dir,
      ...id,
      segmentSize: SEGMENT_SIZE,
      payloadSize: 100,
      seed: 11 + id.partition,
    };
    await generatePartition({ ...gen, messages: MESSAGES });
    for (let i = 0; (await activeSize(src.dirOf(id))) > 0; i++) {
      assert.ok(i < 500);
      await appendMessages({ ...gen, messages: 1 });
    }
    const files = await filesOf(src.dirOf(id));
    const starts = [...files.keys()].filter((n) => n.endsWith(".log")).map((n) =>
      BigInt(n.slice(0, 20))
    );
    const sealed = starts.slice(0, -1);
    const logs = new Map(sealed.map((s) => [s, files.get(`${segmentStem(s)}.log`)!]));
    out.set(partitionLabel(id), {
      id,
      files,
      sealed,
      logs,
      next: starts.at(-1)!,
      incarnation: -1n,
      generation: -1n,
    });
  }
  const once = await runTierd(["run", "--once", "--config", src.configPath], src.env);
  assert.equal(once.code, 0, once.stderr);
  for (const s of out.values()) {
    assert.equal(s.sealed.length, 6, `${partitionLabel(s.id)}: ${s.sealed.length} sealed`);
    const root = `src/${CLUSTER}/${s.id.stream}/${s.id.topic}/${s.id.partition}/`;
    const dirs = new Set(
      (await listBounded(b.store, root)).map((o) => o.key.slice(root.length).split("/")[0]),
    );
    assert.equal(dirs.size, 1, `${root}: ${[...dirs]}`);
    const [hex, gen] = [...dirs][0].split("-");
    s.incarnation = BigInt("0x" + hex);
    s.generation = BigInt(gen);
    // Every sealed segment is in the bucket; all but the last two were evicted locally.
    for (const start of s.sealed) await b.store.head(keysOf(b, s, start).log);
    assert.ok((await logsIn(src.dirOf(s.id))).length <= 3, "the source host evicted");
  }
  assert.ok((await listBounded(b.store, `src/${CLUSTER}/meta/`)).length >= 2, "manifests");
  await b.store.head(`src/${CLUSTER}/owner.json`);
  await b.store.close?.();
  return out;
}

async function makeHost(
  root: string,
  minio: MinioServer,
  b: Bucket,
  endpoint = minio.endpoint,
): Promise<Host> {
  await mkdir(root, { recursive: true });
  let text = recoveryConfigText(root, {
    store: b.kind === "fs" ? { kind: "fs" } : { kind: "minio", minio: { ...minio, endpoint } },
    prefix: b.prefix,
    id: P0,
    segmentSize: SEGMENT_SIZE,
  });
  if (b.kind === "fs") text = text.replace(`path = "${root}/store"`, `path = "${b.path}"`);
  const configPath = join(root, "tierd.toml");
  await writeFile(configPath, text);
  const env = b.kind === "minio" ? s3Env(minio) : {};
  const config = parseConfig(text, configPath, env);
  return {
    root,
    configPath,
    env,
    config,
    dirOf: (id) => partitionDir(config.agent.data_dir, id),
  };
}

/** Copies every object of key space `{fromPrefix}/local/` to `{toPrefix}/local/`, metadata too. */
async function copyKeySpace(
  from: ObjectStore,
  fromPrefix: string,
  to: ObjectStore,
  toPrefix: string,
): Promise<void> {
  const root = `${fromPrefix}/${CLUSTER}/`;
  const objects = await listBounded(from, root);
  assert.ok(objects.length > 0);
  for (const o of objects) {
    const head = await from.head(o.key);
    const got = await from.get(o.key);
    await to.put(`${toPrefix}/${CLUSTER}/${o.key.slice(root.length)}`, got.bytes, {
      metadata: head.metadata,
    });
  }
}

/** An incarnation and generation. */
interface Loc {
  incarnation: bigint;
  generation: bigint;
}

function keysOf(
  b: Bucket,
  s: SourcePartition,
  start: bigint,
  over: Partial<Loc> = {},
): { log: string; index: string } {
  return segmentKeys({
    prefix: b.prefix,
    clusterId: CLUSTER,
    ...s.id,
    incarnation: over.incarnation ?? s.incarnation,
    generation: over.generation ?? s.generation,
  }, start);
}

function manifestKeyOf(b: Bucket, s: { id: PartitionId } & Loc): string {
  return `${b.prefix}/${CLUSTER}/meta/${s.id.stream}/${s.id.topic}/${s.id.partition}/` +
    `${incarnationHex(s.incarnation)}-${s.generation}/manifest.json`;
}

/** Copies a segment's `.log` and `.index` (with their metadata) to other keys: newer objects. */
async function copySegment(
  b: Bucket,
  from: { log: string; index: string },
  to: { log: string; index: string },
): Promise<void> {
  for (const ext of ["log", "index"] as const) {
    const head = await b.store.head(from[ext]);
    const got = await b.store.get(from[ext]);
    await b.store.put(to[ext], got.bytes, { metadata: head.metadata });
  }
}

function randomIncarnation(): bigint {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return BigInt("0x" + [...bytes].map((x) => x.toString(16).padStart(2, "0")).join(""));
}

function restoreOn(h: Host, ...flags: string[]): Promise<Restore> {
  return runTierd(["restore", ...flags, "--config", h.configPath], h.env);
}

function partitionFlags(id: PartitionId): string[] {
  return [
    "--stream",
    String(id.stream),
    "--topic",
    String(id.topic),
    "--partition",
    String(id.partition),
  ];
}

function label(id: PartitionId): string {
  return partitionLabel(id).replace(/\//g, "\\/");
}

/** `restored S/T/P (…): N segments` with no hole. */
function restoredLine(id: PartitionId, segments: number): RegExp {
  return new RegExp(
    `^restored ${label(id)} \\([^)]*\\): ${segments} segments \\([^)]*\\), \\d+ downloaded, ` +
      `\\d+ already in place$`,
    "m",
  );
}

/**
 * The partition was not restored because exactly `candidates` compete: each listed on its own
 * line, and the command that names one.
 * @returns each candidate's line by incarnation (hex)
 */
function assertCompeting(r: Restore, id: PartitionId, candidates: Loc[]): Map<string, string> {
  assert.match(
    r.stderr,
    new RegExp(
      `^NOT restored ${label(id)}: ${candidates.length} incarnations or generations compete:$`,
      "m",
    ),
    r.stderr,
  );
  const lines = new Map<string, string>();
  for (const c of candidates) {
    const hex = incarnationHex(c.incarnation);
    const m = new RegExp(`^  incarnation ${hex} generation ${c.generation}, .*$`, "m")
      .exec(r.stderr);
    assert.ok(m, `candidate ${hex}-${c.generation} not listed:\n${r.stderr}`);
    lines.set(hex, m[0]);
  }
  assert.ok(
    r.stderr.includes(
      `  name one: tierd restore --stream ${id.stream} --topic ${id.topic} --partition ` +
        `${id.partition} --incarnation I --generation G`,
    ),
    r.stderr,
  );
  return lines;
}

/** Nothing of the partition was restored: no broker file, no journal. */
async function assertNothingWritten(h: Host, id: PartitionId): Promise<void> {
  assert.deepEqual(await readdir(h.dirOf(id)).catch(() => []), [], "broker files written");
  const journal = journalPath(partitionStateDir(h.config.agent.state_dir, id));
  assert.equal(await Deno.stat(journal).catch(() => undefined), undefined, "journal written");
}

/**
 * The partition directory holds the source's sealed segments but `holes`, byte-identical, then
 * the empty active segment restore leaves for the broker — as the source's own, empty one —
 * unless the last sealed segment is a hole (nothing says where the broker goes on); the planted or
 * damaged bytes are nowhere.
 */
async function assertRestoredFiles(
  h: Host,
  s: SourcePartition,
  holes: bigint[] = [],
): Promise<void> {
  const dir = h.dirOf(s.id);
  const restored = await filesOf(dir);
  const active = holes.includes(s.sealed.at(-1)!) ? [] : [s.next];
  const want = [...s.sealed.filter((start) => !holes.includes(start)), ...active]
    .flatMap((start) => [`${segmentStem(start)}.index`, `${segmentStem(start)}.log`]).sort();
  assert.deepEqual([...restored.keys()], want, `${partitionLabel(s.id)}: the files restored`);
  for (const [name, bytes] of restored) {
    assert.ok(equalBytes(bytes, s.files.get(name)!), `${partitionLabel(s.id)}: ${name} differs`);
  }
}

async function journalState(h: Host, id: PartitionId): Promise<PartitionState> {
  const path = journalPath(partitionStateDir(h.config.agent.state_dir, id));
  return fold(decodeRecords(new Uint8Array(await readFile(path))).events);
}

/** Files named `journal` anywhere under `dir`. */
async function journalsUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(join(d, e.name));
      else if (e.name === "journal") out.push(join(d, e.name));
    }
  };
  await walk(dir);
  return out;
}

function recordsPath(id: PartitionId, offset: bigint, maxBytes = 24 * KiB): string {
  return `/v1/streams/${id.stream}/topics/${id.topic}/partitions/${id.partition}` +
    `/records?offset=${offset}&max_bytes=${maxBytes}`;
}

function text(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes).slice(0, 500);
}

/**
 * Reads a partition from offset 0 following `x-tierd-next-offset`, across gaps: each answer
 * starts where it was asked, or — reporting `x-tierd-gap` — after the gap; it ends at 404
 * `offset_past_end` or at 410 `offset_gap`.
 */
async function readAcross(api: Api, id: PartitionId): Promise<{
  bytes: Uint8Array;
  gaps: { asked: bigint; gap: string; first: bigint }[];
  end: "offset_past_end" | "offset_gap";
}> {
  const parts: Uint8Array[] = [];
  const gaps: { asked: bigint; gap: string; first: bigint }[] = [];
  let offset = 0n;
  for (let reads = 0; reads < 1000; reads++) {
    const res = await api(recordsPath(id, offset));
    if (res.status === 404 || res.status === 410) {
      const body = await res.json();
      if (res.status === 410) {
        assert.equal(body.error, "offset_gap", JSON.stringify(body));
        gaps.push({ asked: offset, gap: res.headers.get("x-tierd-gap") ?? "", first: -1n });
        return { bytes: concat(parts), gaps, end: "offset_gap" };
      }
      assert.equal(body.error, "offset_past_end", `offset ${offset}: ${JSON.stringify(body)}`);
      return { bytes: concat(parts), gaps, end: "offset_past_end" };
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(res.status, 200, `offset ${offset}: ${res.status} ${text(bytes)}`);
    const first = BigInt(res.headers.get("x-tierd-first-offset")!);
    const gap = res.headers.get("x-tierd-gap");
    if (gap !== null) gaps.push({ asked: offset, gap, first });
    else assert.equal(first, offset, `offset ${offset}: answered from ${first}`);
    parts.push(bytes);
    const next = BigInt(res.headers.get("x-tierd-next-offset")!);
    assert.ok(next > offset, `no progress at offset ${offset}`);
    offset = next;
  }
  throw new Error("more than 1000 reads");
}

/** A directory's files by name (bytes); none when it does not exist. */
async function filesOf(dir: string): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for (const n of (await readdir(dir).catch(() => [] as string[])).sort()) {
    out.set(n, new Uint8Array(await readFile(join(dir, n))));
  }
  return out;
}

/** Start offsets of a partition directory's `.log` files. */
async function logsIn(dir: string): Promise<bigint[]> {
  return (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith(".log"))
    .sort().map((n) => BigInt(n.slice(0, 20)));
}

/** Bytes of a partition directory's last `.log`. */
async function activeSize(dir: string): Promise<number> {
  const last = (await readdir(dir)).filter((n) => n.endsWith(".log")).sort().at(-1)!;
  return (await Deno.stat(join(dir, last))).size;
}
