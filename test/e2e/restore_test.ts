// `tierd restore` onto empty hosts, from MinIO, through the real CLI (issue 10): with
// `--with-data` the broker's partition directories come back — every `.log` passes an Iggy-format
// check with tierd's codecs (bounds, every record checksum, offsets contiguous across
// segments), and every file is byte-identical to the one the source host had — and the agent
// started on the restored host serves every offset; without `--with-data` the agent serves every
// offset from the store. The same after SIGKILLs at random moments during the restore (re-run
// until it exits 0). A partition directory that is not empty is refused with exit 2.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { seededRandom } from "../../src/base/rng.ts";

import { parseConfig } from "../../src/config/load.ts";
import { readSegmentBounds } from "../../src/format/bounds.ts";
import { codecFor } from "../../src/format/codecs.ts";
import { appendMessages, generatePartition, partitionDir } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import { type PartitionId, partitionLabel, segmentStem } from "../../src/layout/partition.ts";
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
import { startS3Tap } from "./_s3_tap.ts";
import {
  type Api,
  bootAgentOn,
  concat,
  equalBytes,
  KiB,
  readEverything,
  recoveryConfigText,
  runAgentOn,
  storeOf,
} from "./_recovery.ts";

const STREAM = 3;
const TOPIC = 1;
const PARTITIONS: { id: PartitionId; format: FormatName }[] = [
  { id: { stream: STREAM, topic: TOPIC, partition: 0 }, format: "iggy-0.9" },
  { id: { stream: STREAM, topic: TOPIC, partition: 1 }, format: "iggy-0.8" },
];
const SEGMENT_SIZE = 16 * KiB;

/** One host: a root dir with its config (broker, state, cache under it). */
interface Host {
  root: string;
  configPath: string;
  env: Record<string, string>;
  config: ReturnType<typeof parseConfig>;
  dirOf(id: PartitionId): string;
}

async function host(
  root: string,
  minio: MinioServer,
  endpoint = minio.endpoint,
): Promise<Host> {
  await mkdir(root, { recursive: true });
  const text = recoveryConfigText(root, {
    store: { kind: "minio", minio: { ...minio, endpoint } },
    prefix: "iggy",
    id: PARTITIONS[0].id,
    segmentSize: SEGMENT_SIZE,
  });
  const configPath = join(root, "tierd.toml");
  await writeFile(configPath, text);
  const env = s3Env(minio);
  const config = parseConfig(text, configPath, env);
  return {
    root,
    configPath,
    env,
    config,
    dirOf: (id) => partitionDir(config.agent.data_dir, id),
  };
}

/** A directory's files by name (bytes). */
async function filesOf(dir: string): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for (const n of (await readdir(dir)).sort()) {
    out.set(n, new Uint8Array(await readFile(join(dir, n))));
  }
  return out;
}

/**
 * The Iggy-format check of a restored partition directory with tierd's codecs: every `.log` has
 * its `.index`, walks from its first byte to its last with every record checksum verified, its
 * first record at the offset its name says and the next segment starting right after its last;
 * its bounds read as the broker derives them agree; its index parses against it. The last
 * segment is the empty active one restore leaves for the broker (0 bytes each, as Iggy makes it).
 * @returns the offsets covered, inclusive
 */
async function checkIggyDirectory(dir: string, format: FormatName): Promise<[bigint, bigint]> {
  await initHashes();
  const codec = codecFor(format);
  const names = (await readdir(dir)).sort();
  assert.deepEqual(names.filter((n) => n.endsWith(".restore")), [], "no temp file left");
  const logs = names.filter((n) => n.endsWith(".log"));
  assert.ok(logs.length > 1);
  const active = logs.pop()!;
  let expectedStart: bigint | undefined;
  let first = -1n;
  let last = -1n;
  for (const name of logs) {
    const start = BigInt(name.slice(0, 20));
    const logPath = join(dir, name);
    const indexPath = logPath.replace(/\.log$/, ".index");
    assert.ok(names.includes(name.replace(/\.log$/, ".index")), `${name} has no .index`);
    if (expectedStart !== undefined) {
      assert.equal(start, expectedStart, `${name} does not follow on`);
    }
    const log = new Uint8Array(await readFile(logPath));
    let end = start - 1n;
    let records = 0;
    for (const r of codec.walk(log, { file: logPath, startOffset: start, verify: true })) {
      end = r.lastOffset;
      records++;
    }
    assert.ok(records > 0, `${name} holds no record`);
    const bounds = await readSegmentBounds(logPath, indexPath, format, start);
    assert.equal(bounds.startOffset, start);
    assert.equal(bounds.endOffset, end, `${name}: bounds end`);
    assert.equal(bounds.size, log.length);
    const index = new Uint8Array(await readFile(indexPath));
    codec.parseIndex(index, { file: indexPath, startOffset: start, logSize: log.length });
    if (first < 0n) first = start;
    last = end;
    expectedStart = end + 1n;
  }
  assert.equal(active, `${segmentStem(expectedStart!)}.log`, "the active segment follows on");
  for (const ext of [".log", ".index"]) {
    const path = join(dir, active.replace(/\.log$/, ext));
    assert.equal((await Deno.stat(path)).size, 0, `${path} is not empty`);
  }
  return [first, last];
}

/**
 * Reads every partition through an agent on `h` — in-process, or the real `tierd run` — and
 * compares with `chains`.
 */
async function assertServesEverything(
  h: Host,
  minio: MinioServer,
  chains: Map<string, Uint8Array>,
  expectSource: "remote" | "local",
  how: "in-process" | "tierd run" = "in-process",
): Promise<void> {
  const store = storeOf({ kind: "minio", minio }, h.root);
  let api: Api;
  let close: () => Promise<unknown>;
  if (how === "in-process") {
    const agent = await bootAgentOn({ config: h.config, store, prefix: "iggy" });
    assert.deepEqual(agent.report.problems, []);
    assert.equal(agent.report.lost, 0);
    api = agent.api;
    close = () => agent.close();
  } else {
    const agent = await runAgentOn(h);
    api = agent.api;
    close = async () =>
      assert.equal((await agent.stop()).code, 0, agent.process.output().slice(-3000));
  }
  try {
    for (const { id } of PARTITIONS) {
      const { bytes, sources } = await readEverything(api, id);
      const want = chains.get(partitionLabel(id))!;
      assert.equal(bytes.length, want.length, `${partitionLabel(id)}: bytes served`);
      assert.ok(equalBytes(bytes, want), `${partitionLabel(id)}: other bytes served`);
      assert.ok(sources.has(expectSource), `${partitionLabel(id)}: sources ${[...sources]}`);
    }
    assert.match(
      await (await api("/metrics")).text(),
      /^tierd_segments_lost_before_upload_total 0$/m,
    );
  } finally {
    await close();
    await store.close?.();
  }
}

/** The checks after `restore --with-data` exited 0 on `h`. */
async function assertRestoredWithData(
  h: Host,
  minio: MinioServer,
  sources: Map<string, Map<string, Uint8Array>>,
  chains: Map<string, Uint8Array>,
): Promise<void> {
  for (const { id, format } of PARTITIONS) {
    const dir = h.dirOf(id);
    const [first, last] = await checkIggyDirectory(dir, format);
    const source = sources.get(partitionLabel(id))!;
    const restored = await filesOf(dir);
    // Every segment in the bucket, byte for byte, then an empty active one: the source's last
    // (active, empty) segment was never copied, and restore makes the same for the broker.
    assert.deepEqual(
      [...restored.keys()],
      [...source.keys()],
      `${partitionLabel(id)}: the files restored`,
    );
    for (const [name, bytes] of restored) {
      assert.ok(equalBytes(bytes, source.get(name)!), `${partitionLabel(id)}: ${name} differs`);
    }
    assert.equal(first, 0n);
    assert.equal(last + 1n, BigInt([...source.keys()].at(-1)!.slice(0, 20)));
  }
  await assertServesEverything(h, minio, chains, "local");
}

if (await minioAvailable("restore tests against MinIO")) {
  Deno.test("tierd restore onto empty hosts from MinIO: --with-data (Iggy-format check, byte-identical), without data, after SIGKILLs, refusing a non-empty directory", async (t) => {
    await initHashes();
    const seed = Number(Deno.env.get("TIERD_RESTORE_SEED") ?? Date.now() % 1_000_000);
    console.error(`restore test seed ${seed} (TIERD_RESTORE_SEED=${seed} to repeat)`);
    const random = seededRandom(seed);
    const minio = (await startMinioReady())!;
    const tap = await startS3Tap(minio.endpoint);
    // A memory filesystem where there is one: the restores fsync every file.
    const tmp = await scratchDir("tierd-restore");
    try {
      // The source host: two partitions, every message in a sealed segment (the active one is
      // empty), tiered by `tierd run --once` (copies, evictions, manifests).
      const src = await host(join(tmp.path, "source"), minio);
      const sources = new Map<string, Map<string, Uint8Array>>();
      const chains = new Map<string, Uint8Array>();
      for (const { id, format } of PARTITIONS) {
        const gen = {
          format,
          dataDir: src.config.agent.data_dir,
          ...id,
          segmentSize: SEGMENT_SIZE,
          payloadSize: 100,
          seed: 11 + id.partition,
        };
        await generatePartition({ ...gen, messages: 2400 });
        // One message at a time until the active segment is a fresh, empty one.
        for (let i = 0; (await activeSize(src.dirOf(id))) > 0; i++) {
          assert.ok(i < 500);
          await appendMessages({ ...gen, messages: 1 });
        }
        const files = await filesOf(src.dirOf(id));
        sources.set(partitionLabel(id), files);
        chains.set(
          partitionLabel(id),
          concat([...files].filter(([n]) => n.endsWith(".log")).map(([, b]) => b)),
        );
      }
      const once = await runTierd(["run", "--once", "--config", src.configPath], src.env);
      assert.equal(once.code, 0, once.stderr);
      const store = minioStore(minio);
      const manifests = (await listBounded(store, "iggy/local/meta/")).map((o) => o.key);
      assert.equal(manifests.length, PARTITIONS.length, `manifests: ${manifests}`);
      // Every sealed segment is in the bucket (.log and .index); the empty active ones are not.
      const sealed = [...sources.values()].reduce(
        (n, files) => n + [...files.keys()].filter((f) => f.endsWith(".log")).length - 1,
        0,
      );
      assert.equal((await listBounded(store, "iggy/local/3/")).length, 2 * sealed);

      await t.step(
        "restore --with-data onto an empty host: restored, Iggy-format check, served",
        async () => {
          const h = await host(join(tmp.path, "with-data"), minio);
          const r = await runTierd(["restore", "--with-data", "--config", h.configPath], h.env);
          assert.equal(r.code, 0, r.stderr);
          for (const { id } of PARTITIONS) {
            assert.match(
              r.stderr,
              new RegExp(
                `restored ${
                  partitionLabel(id)
                } \\(incarnation [0-9a-f]{16} generation 0, the only ` +
                  `incarnation and generation in the bucket\\): \\d+ segments .*\\d+ downloaded`,
              ),
            );
            assert.match(
              r.stderr,
              new RegExp(`restore ${partitionLabel(id)}: \\d+/\\d+ segments, `),
            );
          }
          await assertRestoredWithData(h, minio, sources, chains);
        },
      );

      await t.step(
        "restore without --with-data onto another empty host: every offset from the store",
        async () => {
          const h = await host(join(tmp.path, "state-only"), minio);
          const r = await runTierd(["restore", "--config", h.configPath], h.env);
          assert.equal(r.code, 0, r.stderr);
          for (const { id } of PARTITIONS) {
            assert.deepEqual(
              await readdir(h.dirOf(id)).catch(() => []),
              [],
              "no broker file written",
            );
          }
          // The host's new broker starts empty; `tierd run` wants its data dir to exist.
          await mkdir(join(h.config.agent.data_dir, "streams"), { recursive: true });
          await assertServesEverything(h, minio, chains, "remote", "tierd run");
        },
      );

      await t.step(
        "restore --with-data SIGKILLed at random moments, re-run until it exits 0: the same checks",
        async () => {
          const h = await host(join(tmp.path, "killed"), minio, tap.endpoint);
          // Where each run dies, in turn: at an early random GetObject (mid-download) three
          // times, which always lands while objects are left; then at a random moment soon after
          // the run's first GetObject, right as the journal appears (state being written), at a
          // random moment again — these land only while work is left — and a run left alone.
          // (A timer counted from the spawn missed on a fast machine: the resumed run was done.)
          const aims = ["get", "get", "get", "timer", "journal", "timer"] as const;
          await mkdir(h.config.agent.state_dir, { recursive: true });
          let kills = 0;
          let runs = 0;
          const landed: string[] = [];
          for (;;) {
            const aim = aims[runs] as (typeof aims)[number] | undefined;
            runs++;
            assert.ok(runs <= aims.length + 3, `restore never finished after ${kills} kills`);
            const child = spawnTierd(["restore", "--with-data", "--config", h.configPath], h.env);
            let killedAt: string | undefined;
            const kill = (what: string) => {
              if (killedAt) return;
              killedAt = what;
              child.kill("SIGKILL");
            };
            let gets = 0;
            // Early enough that a kill lands even when little is left to download (each run
            // resumes where the last one died), so the first three always do.
            const killAt = 1 + Math.floor(random() * 4);
            const delay = Math.floor(random() * 30);
            let timer: ReturnType<typeof setTimeout> | undefined;
            if (aim === "get" || aim === "timer") {
              tap.on((e) => {
                if (e.op !== "GetObject" || e.phase !== "request") return;
                gets++;
                if (aim === "get" && gets >= killAt) kill(`GetObject #${gets}`);
                if (aim === "timer" && gets === 1) {
                  timer = setTimeout(() => kill(`${delay} ms after the first GetObject`), delay);
                }
              });
            }
            const watcher = aim === "journal"
              ? Deno.watchFs(h.config.agent.state_dir, { recursive: true })
              : undefined;
            const watching = (async () => {
              if (!watcher) return;
              for await (const e of watcher) {
                if (e.paths.some((p) => p.endsWith("/journal"))) kill("journal written");
              }
            })();
            const status = await child.status;
            clearTimeout(timer);
            watcher?.close();
            await watching;
            tap.on(undefined);
            if (killedAt) {
              assert.notEqual(status.code, 0);
              kills++;
              landed.push(killedAt);
              continue;
            }
            assert.equal(status.code, 0, child.output().slice(-3000));
            break;
          }
          console.error(`restore: ${kills} SIGKILLs (${landed.join(", ")}), ${runs} runs`);
          assert.ok(kills >= 3, `only ${kills} kills landed`);
          await assertRestoredWithData(h, minio, sources, chains);
        },
      );

      await t.step(
        "restore --with-data refuses (exit 2) a partition directory that is not empty",
        async () => {
          const h = await host(join(tmp.path, "occupied"), minio);
          const dir = h.dirOf(PARTITIONS[0].id);
          await mkdir(dir, { recursive: true });
          await writeFile(join(dir, "notes.txt"), "the operator's");
          const r = await runTierd(["restore", "--with-data", "--config", h.configPath], h.env);
          assert.equal(r.code, 2, r.stderr);
          assert.match(
            r.stderr,
            /is not empty \(notes\.txt\): restore --with-data writes only into an empty partition directory/,
          );
          assert.ok(r.stderr.includes(dir), r.stderr);
          assert.deepEqual(await readdir(dir), ["notes.txt"], "nothing written into it");
          assert.equal(await readFile(join(dir, "notes.txt"), "utf8"), "the operator's");
        },
      );
      await store.close?.();
    } finally {
      await tap.close();
      await minio.stop();
      await tmp.cleanup();
    }
  });
}

/** Bytes of a partition directory's last `.log`. */
async function activeSize(dir: string): Promise<number> {
  const last = (await readdir(dir)).filter((n) => n.endsWith(".log")).sort().at(-1)!;
  return (await Deno.stat(join(dir, last))).size;
}
