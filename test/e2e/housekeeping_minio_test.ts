// Housekeeping against MinIO (issue 10), every request counted at MinIO by the S3 tap, not by
// tierd's own counters: each run sends at most `request_quota` requests, and the next run goes
// on where the last one stopped. The verify pass reports a deleted copy of an evicted segment
// (error line, tierd_remote_objects_missing_total) and turns a deleted copy of a segment still
// local DANGLING, so the next pass copies it again; the sweep deletes an incarnation this agent
// retired (after a recreate) only once `orphan_grace` has passed since, never the current one's,
// and never one it did not retire (a stranger's, planted under the partition's root); the multipart sweep aborts an upload under tierd's prefix once it is a day old,
// not while fresh, and never one outside the prefix; `manifest.json` lists the copies and is
// rewritten only when they change, at most every `manifest_upload_interval`. Time moves with a
// clock ahead of the real one.
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { aheadClock } from "../_fake_clock.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { appendMessages, generatePartition } from "../../src/format/generate.ts";
import { decodeManifest } from "../../src/layout/manifest.ts";
import {
  clusterRoot,
  manifestKey,
  partitionRoot,
  segmentKeys,
} from "../../src/layout/object_keys.ts";
import { incarnationHex } from "../../src/layout/partition.ts";
import { tierObserver } from "../../src/metrics/observers.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics } from "../../src/metrics/tierd.ts";
import { getSegment, segmentsOf } from "../../src/state/segment_state.ts";
import type { JobOutcome } from "../../src/tier/housekeeping/job.ts";
import { TierWorker } from "../../src/tier/tier_worker.ts";
import { capturingLogger, type LogLine } from "../_model/tier_harness.ts";
import { minioAvailable, minioStore, startMinioReady } from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import { type S3Tap, startS3Tap, type TapEvent } from "./_s3_tap.ts";
import { journalState, KiB, logged, type RecoveryRig, recoveryRig } from "./_recovery.ts";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A worker on a rig whose store goes through the tap, on a clock `skew` ms ahead. */
interface Agent {
  worker: TierWorker;
  lines: LogLine[];
  registry: Registry;
  /** Moves the clock ahead (ms). */
  ahead(ms: number): void;
  /** One forced housekeeping run; the requests MinIO saw during it. */
  housekeep(): Promise<{ jobs: JobOutcome[]; requests: TapEvent[] }>;
}

function agentOn(rig: RecoveryRig, tap: S3Tap): Agent {
  let skew = 0;
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const { logger, lines } = capturingLogger("info");
  const worker = new TierWorker({
    config: rig.config,
    store: rig.store,
    prefix: rig.prefix,
    logger,
    clock: aheadClock(() => skew),
    observer: tierObserver(metrics),
  });
  return {
    worker,
    lines,
    registry,
    ahead: (ms) => void (skew += ms),
    async housekeep() {
      const requests: TapEvent[] = [];
      tap.on((e) => void (e.phase === "request" && requests.push(e)));
      try {
        const jobs = (await worker.housekeep({ force: true })) ?? [];
        return { jobs, requests };
      } finally {
        tap.on(undefined);
      }
    },
  };
}

function job(jobs: JobOutcome[], name: string): JobOutcome | undefined {
  return jobs.find((j) => j.job === name);
}

async function exists(store: ObjectStore, key: string): Promise<boolean> {
  try {
    await store.head(key);
    return true;
  } catch (err) {
    if (err instanceof StoreError && err.kind === "NotFound") return false;
    throw err;
  }
}

function missingTotal(registry: Registry): number {
  const m = /^tierd_remote_objects_missing_total (\d+)$/m.exec(registry.render());
  return Number(m?.[1]);
}

/** The rig's store, through the tap in front of MinIO. */
function tapped(minio: MinioServer, tap: S3Tap): MinioServer {
  return { ...minio, endpoint: tap.endpoint };
}

if (await minioAvailable("housekeeping against MinIO")) {
  Deno.test("housekeeping against MinIO within a request quota: verify pass, manifests, orphan sweep, multipart sweep", async (t) => {
    const minio = (await startMinioReady())!;
    const tap = await startS3Tap(minio.endpoint);
    const direct = minioStore(minio); // the test's own hands, not counted
    try {
      await t.step(
        "verify: a missing copy reported, a missing one still local copied again; manifest kept in step; each run within the quota, the next going on where it stopped",
        async () => {
          const QUOTA = 10;
          const rig = await recoveryRig({
            format: "iggy-0.9",
            store: { kind: "minio", minio: tapped(minio, tap) },
            prefix: "verify",
            extra: `[tiered_storage.housekeeping]\nrequest_quota = ${QUOTA}\n` +
              `manifest_upload_interval = "60 s"\nverify_interval = "6 h"\n`,
          });
          const agent = agentOn(rig, tap);
          try {
            const first = await agent.worker.pass();
            assert.deepEqual(first.problems, []);
            const state = await journalState(rig);
            const copies = segmentsOf(state).filter((r) => r.state === "COPY_SEGMENT_FINISHED");
            assert.ok(copies.length * 2 > 2 * QUOTA, "more objects to check than one run may");
            const loc = {
              ...rig.id,
              prefix: rig.prefix,
              clusterId: "local",
              incarnation: state.incarnation!,
              generation: 0n,
            };
            const evictedGone = copies.filter((r) => r.evicted)[Math.floor(copies.length / 2)];
            const localGone = copies.find((r) => !r.evicted)!;
            assert.ok(localGone, "a copied segment still local");
            await direct.deleteMany([segmentKeys(loc, evictedGone.start).log]);
            await direct.deleteMany([segmentKeys(loc, localGone.start).log]);

            // Runs until the verify pass is through: each within the quota, each going on from
            // the segment the last one had not finished.
            const checked: bigint[][] = [];
            let manifestPuts = 0;
            for (let run = 0;; run++) {
              assert.ok(run < 10, "the verify pass never finished");
              const { jobs, requests } = await agent.housekeep();
              assert.ok(
                requests.length <= QUOTA,
                `run ${run + 1} sent ${requests.length} requests, quota ${QUOTA}: ` +
                  requests.map((r) => `${r.op} ${r.key}`).join(", "),
              );
              manifestPuts += requests.filter((r) =>
                r.op === "PutObject" && r.key.endsWith("manifest.json")
              ).length;
              const heads = requests.filter((r) => r.op === "HeadObject" && r.key.endsWith(".log"))
                .map((r) => BigInt(r.key.slice(-24, -4)));
              checked.push(heads);
              if (run > 0) {
                // Where the last run stopped: its last .log HEADed, whose check the quota cut
                // (or the one after its last whole check).
                const lastRun = checked[run - 1];
                const resumed = heads[0];
                assert.ok(
                  resumed === lastRun.at(-1) ||
                    resumed ===
                      copies[copies.findIndex((c) => c.start === lastRun.at(-1)) + 1]?.start,
                  `run ${run + 1} started at ${resumed}, the last stopped at ${lastRun.at(-1)}`,
                );
              }
              if (job(jobs, "verify")?.complete) break;
              assert.ok(requests.length === QUOTA, `run ${run + 1} stopped short of its quota`);
            }
            assert.ok(checked.length >= 3, `${checked.length} runs`);
            assert.deepEqual(
              [...new Set(checked.flat())].sort((a, b) => (a < b ? -1 : 1)),
              copies.map((c) => c.start),
              "every copy below the floor was checked",
            );
            assert.equal(manifestPuts, 1, "one manifest written in all those runs");

            // The evicted segment's only copy is gone: said loudly, once, never repaired.
            const gone = logged(
              agent.lines,
              "error",
              /the only copy of an evicted segment is gone/,
            );
            assert.equal(
              gone.length,
              1,
              JSON.stringify(agent.lines.filter((l) => l.level !== "info")),
            );
            assert.equal(gone[0].key, segmentKeys(loc, evictedGone.start).log);
            assert.equal(gone[0].problem, "missing");
            // The local one's copy is gone: DANGLING, so the next pass copies it again.
            const again = logged(agent.lines, "warn", /will be copied again/);
            assert.equal(again.length, 1);
            assert.equal(again[0].key, segmentKeys(loc, localGone.start).log);
            assert.equal(
              getSegment(agent.worker.partitions[0].state, 0n, localGone.start)?.state,
              "DANGLING",
            );
            assert.equal(missingTotal(agent.registry), 2);

            const next = await agent.worker.pass();
            assert.deepEqual(next.problems, []);
            assert.equal(next.cleaned, 1);
            assert.equal(next.copied, 1);
            assert.ok(await exists(direct, segmentKeys(loc, localGone.start).log), "copied again");
            assert.equal(
              getSegment(agent.worker.partitions[0].state, 0n, localGone.start)?.state,
              "COPY_SEGMENT_FINISHED",
            );
            assert.equal(
              await exists(direct, segmentKeys(loc, evictedGone.start).log),
              false,
              "no repair invented",
            );

            // manifest.json lists the copies (the one DANGLING back in once copied again), and is
            // rewritten only when they changed, at most every manifest_upload_interval.
            const key = manifestKey(loc);
            const listed = async () => decodeManifest(key, (await direct.get(key)).bytes);
            const m1 = await listed();
            assert.equal(m1.incarnation, state.incarnation);
            assert.equal(m1.format, "iggy-0.9");
            assert.equal(m1.floor, state.floor);
            assert.deepEqual(m1.segments.map((s) => s.start), copies.map((c) => c.start));
            assert.deepEqual(
              m1.segments.filter((s) => s.evicted).map((s) => s.start),
              copies.filter((c) => c.evicted).map((c) => c.start),
            );
            for (const s of m1.segments) {
              assert.deepEqual(
                { ...s, evicted: undefined, start: undefined },
                {
                  ...copies.find((c) => c.start === s.start)!.meta,
                  evicted: undefined,
                  start: undefined,
                },
              );
            }
            const puts = async () =>
              (await agent.housekeep()).requests.filter((r) =>
                r.op === "PutObject" && r.key === key
              ).length;
            agent.ahead(2 * MINUTE);
            assert.equal(await puts(), 0, "unchanged: not rewritten");
            // A new copy: not rewritten within the interval, then rewritten.
            await appendMessages({
              format: rig.format,
              dataDir: rig.config.agent.data_dir,
              ...rig.id,
              messages: 300,
              segmentSize: 16 * KiB,
              payloadSize: 100,
              seed: 3,
            });
            const grown = await agent.worker.pass();
            assert.deepEqual(grown.problems, []);
            assert.ok(grown.copied >= 1);
            agent.ahead(2 * MINUTE);
            assert.equal(await puts(), 1, "changed: rewritten");
            const m2 = await listed();
            const now = segmentsOf(agent.worker.partitions[0].state).filter((r) =>
              r.state === "COPY_SEGMENT_FINISHED"
            );
            assert.deepEqual(m2.segments.map((s) => s.start), now.map((r) => r.start));
            assert.ok(m2.segments.length > m1.segments.length);
            await appendMessages({
              format: rig.format,
              dataDir: rig.config.agent.data_dir,
              ...rig.id,
              messages: 300,
              segmentSize: 16 * KiB,
              payloadSize: 100,
              seed: 4,
            });
            assert.ok((await agent.worker.pass()).copied >= 1);
            agent.ahead(30_000);
            assert.equal(await puts(), 0, "changed, but written less than 60 s ago");
            agent.ahead(31_000);
            assert.equal(await puts(), 1, "the interval passed: rewritten");

            // The next verify pass (verify_interval later) finds the same hole: not counted twice.
            agent.ahead(7 * HOUR);
            for (let run = 0;; run++) {
              assert.ok(run < 10, "the second verify pass never finished");
              const { jobs, requests } = await agent.housekeep();
              assert.ok(requests.length <= QUOTA);
              if (job(jobs, "verify")?.complete) break;
            }
            assert.equal(
              logged(agent.lines, "error", /the only copy of an evicted segment is gone/).length,
              1,
            );
            assert.equal(missingTotal(agent.registry), 2);
          } finally {
            await agent.worker.close();
            await rig.cleanup();
          }
        },
      );

      await t.step(
        "sweep and multipart sweep: a retired incarnation deleted only after orphan_grace, never the current one nor a stranger's; an upload aborted once a day old, never outside tierd's prefix; each run within the quota",
        async () => {
          const QUOTA = 2;
          const rig = await recoveryRig({
            format: "iggy-0.8",
            store: { kind: "minio", minio: tapped(minio, tap) },
            prefix: "sweep",
            extra: `[tiered_storage.housekeeping]\nrequest_quota = ${QUOTA}\n` +
              `verify_interval = "unlimited"\norphan_sweep_interval = "1 h"\norphan_grace = "2 h"\n`,
          });
          try {
            const old = (await journalState(rig)).incarnation!;
            // The topic deleted and recreated: other bytes at the same offsets.
            await rm(rig.dir, { recursive: true });
            await generatePartition({
              format: rig.format,
              dataDir: rig.config.agent.data_dir,
              ...rig.id,
              messages: 1200,
              segmentSize: 16 * KiB,
              payloadSize: 100,
              seed: 9,
            });
            const agent = agentOn(rig, tap);
            try {
              const boot = await agent.worker.pass();
              assert.deepEqual(boot.problems, []);
              const current = agent.worker.partitions[0].state.incarnation!;
              assert.notEqual(current, old, "a new incarnation");
              const root = partitionRoot({ ...rig.id, prefix: rig.prefix, clusterId: "local" });
              const objectsOf = async (inc: bigint) =>
                (await listBounded(direct, `${root}${incarnationHex(inc)}-0/`)).map((o) => o.key);
              const oldObjects = await objectsOf(old);
              const currentObjects = await objectsOf(current);
              assert.equal(oldObjects.length, 2 * (rig.logs.size - 1));
              assert.ok(currentObjects.length > 0);

              // Uploads left open: one under tierd's prefix, one outside it.
              const cluster = clusterRoot({ prefix: rig.prefix, clusterId: "local" });
              const abandonedKey = `${root}${incarnationHex(current)}-0/00000000000099999999.log`;
              const outsideKey = "not-tierd/somebody-elses-upload.bin";
              const abandoned = await direct.createMultipart(abandonedKey);
              const outside = await direct.createMultipart(outsideKey);
              const open = async () =>
                (await direct.listMultipartUploads("")).map((u) => u.uploadId);

              // Never this agent's to delete: an incarnation it never had (another agent's, or
              // one planted by hand), even once far older than the grace.
              const stranger = 0x5eed5eed5eed5eedn;
              const strangerKey = `${root}${incarnationHex(stranger)}-0/00000000000000000000.log`;
              await direct.put(strangerKey, new TextEncoder().encode("not tierd's"));

              const runs: { jobs: JobOutcome[]; requests: TapEvent[] }[] = [];
              const run = async () => {
                const r = await agent.housekeep();
                assert.ok(
                  r.requests.length <= QUOTA,
                  `${r.requests.length} requests, quota ${QUOTA}: ` +
                    r.requests.map((q) => `${q.op} ${q.key}`).join(", "),
                );
                runs.push(r);
                return r;
              };
              // The recreate retired the old incarnation: journaled, its tombstone written (a
              // restore never takes it for the partition). Its grace counts from then.
              const state = agent.worker.partitions[0].state;
              assert.deepEqual(
                [...state.retired!.values()].map((r) => [r.incarnation, r.generation]),
                [[old, 0n]],
              );
              const tombstone = decodeManifest(
                manifestKey({
                  ...rig.id,
                  prefix: rig.prefix,
                  clusterId: "local",
                  incarnation: old,
                  generation: 0n,
                }),
                (await direct.get(
                  manifestKey({
                    ...rig.id,
                    prefix: rig.prefix,
                    clusterId: "local",
                    incarnation: old,
                    generation: 0n,
                  }),
                )).bytes,
              );
              assert.ok(tombstone.retired, "the tombstone says it is retired");
              const r1 = await run();
              assert.equal(job(r1.jobs, "orphan_sweep")?.counts.retired, 1);
              assert.equal(job(r1.jobs, "orphan_sweep")?.counts.swept, 0);
              // The multipart sweep, in this run or (the quota spent) the next.
              let firstSweep = job(r1.jobs, "multipart_sweep");
              for (let i = 0; i < 3 && !firstSweep?.complete; i++) {
                firstSweep = job((await run()).jobs, "multipart_sweep");
              }
              assert.ok(firstSweep?.complete, "the multipart sweep ran");
              assert.equal(firstSweep.counts.aborted, 0, "a fresh upload is not abandoned");
              assert.ok((await open()).includes(abandoned));
              assert.deepEqual(await objectsOf(old), oldObjects);

              // 1.5 h on: still within its grace.
              agent.ahead(90 * MINUTE);
              const r2 = await run();
              assert.equal(job(r2.jobs, "orphan_sweep")?.counts.swept, 0);
              assert.deepEqual(
                await objectsOf(old),
                oldObjects,
                "nothing deleted within the grace",
              );

              // 2.5 h on: the grace has passed: the old incarnation goes (its tombstone last),
              // the current one stays, and so does the stranger's.
              agent.ahead(60 * MINUTE);
              let swept = 0;
              const sweepRuns: typeof runs = [];
              for (let i = 0; i < 3 && swept === 0; i++) {
                const r = await run();
                sweepRuns.push(r);
                swept += job(r.jobs, "orphan_sweep")?.counts.swept ?? 0;
              }
              assert.equal(swept, 1, JSON.stringify(sweepRuns.map((r) => r.jobs)));
              assert.deepEqual(await objectsOf(old), [], "the retired incarnation is gone");
              assert.equal(
                await exists(
                  direct,
                  manifestKey({
                    ...rig.id,
                    prefix: rig.prefix,
                    clusterId: "local",
                    incarnation: old,
                    generation: 0n,
                  }),
                ),
                false,
                "its tombstone too",
              );
              assert.deepEqual(
                await objectsOf(current),
                currentObjects,
                "the current one is whole",
              );
              assert.ok(await exists(direct, strangerKey), "an incarnation never ours stays");
              const deletes = sweepRuns.flatMap((r) => r.requests).filter((r) =>
                r.op === "DeleteObjects"
              );
              assert.equal(deletes.length, 1);
              const sweptLines = logged(
                agent.lines,
                "info",
                /retired incarnation\/generation swept/,
              );
              assert.equal(sweptLines.length, 1);
              assert.equal(sweptLines[0].prefix, `${root}${incarnationHex(old)}-0/`);
              assert.equal(agent.worker.partitions[0].state.retired, undefined, "swept, journaled");

              await direct.deleteMany([strangerKey]);

              // A day on: the upload under tierd's prefix is abandoned and aborted; the other is
              // not tierd's and stays.
              agent.ahead(DAY);
              let aborted = 0;
              for (let i = 0; i < 3 && aborted === 0; i++) {
                const r = await run();
                aborted += job(r.jobs, "multipart_sweep")?.counts.aborted ?? 0;
                assert.ok(
                  r.requests.every((q) =>
                    q.op !== "AbortMultipartUpload" || q.key === abandonedKey
                  ),
                );
              }
              assert.equal(aborted, 1);
              const left = await open();
              assert.ok(!left.includes(abandoned), "the abandoned upload was aborted");
              assert.ok(left.includes(outside), "an upload outside tierd's prefix is left alone");
              assert.ok(abandonedKey.startsWith(cluster));
              // Reads of the current incarnation still work: nothing of it was touched.
              assert.deepEqual(await objectsOf(current), currentObjects);
            } finally {
              await agent.worker.close();
            }
            await direct.abortMultipart(
              "not-tierd/somebody-elses-upload.bin",
              (await direct.listMultipartUploads("")).find((u) => u.key.startsWith("not-tierd/"))!
                .uploadId,
            );
          } finally {
            await rig.cleanup();
          }
        },
      );
    } finally {
      await direct.close?.();
      await tap.close();
      await minio.stop();
    }
  });
}
