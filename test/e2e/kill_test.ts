// The real agent (`tierd run`, continuous) against MinIO, SIGKILLed at 50+ moments — right after
// start, mid-PUT, mid-multipart, while markers are written and broker files unlinked, during
// dangling cleanup and journal compaction, and at random — while a writer keeps appending. After
// every kill the broker directory, the state directory and the bucket are checked against an
// oracle of every segment ever sealed. Every eighth kill is followed by a settled run stopped
// cleanly (SIGTERM), and the next boot, which takes the clean-stop record, is killed while its
// first pass reads the markers boot trusted. At the end a clean SIGTERM, a `run --once`, and no
// DANGLING segment or incomplete multipart upload may remain. Skipped loudly without MinIO.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { seededRandom } from "../../src/base/rng.ts";
import { initHashes } from "../../src/hash.ts";
import { decodeRecords, Journal } from "../../src/state/journal.ts";
import type { JournalEvent } from "../../src/state/events.ts";
import { fold, getSegment } from "../../src/state/segment_state.ts";
import {
  type AgentProcess,
  minioAvailable,
  minioStore,
  runTierd,
  s3ConfigText,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { tempDir } from "../_util.ts";
import { BrokerOracle, type OraclePartition, settle, uploadHistory } from "./_oracle.ts";
import { startS3Tap } from "./_s3_tap.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const STREAM = 5;
const TOPIC = 2;
const MIN_KILLS = 50;
const MAX_KILLS = 64;
/** Stop adding kills past MIN_KILLS once this much time went by. */
const KILL_BUDGET_MS = 150_000;

/**
 * Where each kill is aimed, in turn. Tap aims fire on the S3 traffic itself (a request arriving
 * at MinIO, or MinIO's answer before the agent sees it); journal and file aims on what the agent
 * writes; log aims on its stderr. An aim placed after another finds the cleanup that one left.
 */
const AIMS = [
  "immediately",
  "mid PUT",
  "DeleteObjects answered",
  "marker write",
  "random",
  "UploadPart in flight",
  "AbortMultipartUpload answered",
  "at boot",
  "broker unlink",
  "CreateMultipartUpload answered",
  "dangling journaled",
  "mid multipart",
  "delete_started journaled",
  "after copy",
  "compaction",
  "random",
  "CompleteMultipartUpload answered",
  ".index PutObject answered",
  "after evicted",
  "marker write",
  "random",
] as const;
/**
 * The aim of each cycle that follows a clean stop: its boot trusts the clean-stop record, and
 * the kill lands while the first pass reads the markers boot did not.
 */
const AFTER_CLEAN_STOP = "first pass reading trusted markers";
type Aim = typeof AIMS[number] | typeof AFTER_CLEAN_STOP;
/** Aims that need a large segment waiting to be copied (multipart). */
const MULTIPART_AIMS = new Set<Aim>([
  "UploadPart in flight",
  "CreateMultipartUpload answered",
  "mid multipart",
  "CompleteMultipartUpload answered",
]);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

if (await minioAvailable("kill test against MinIO")) {
  Deno.test("SIGKILL at 50+ moments never loses or exposes a segment", async () => {
    await initHashes();
    const seed = Number(Deno.env.get("TIERD_KILL_SEED") ?? Date.now() % 1_000_000);
    console.error(`kill test seed ${seed} (TIERD_KILL_SEED=${seed} to repeat)`);
    const random = seededRandom(seed);
    const minio = (await startMinioReady())!;
    const tap = await startS3Tap(minio.endpoint);
    const tmp = await tempDir("tierd-kill");
    const store = minioStore(minio);
    const started = Date.now();
    let agent: AgentProcess | undefined;
    let events: TreeEvents | undefined;
    const landings = new Map<string, number>();
    const land = (where: string) => landings.set(where, (landings.get(where) ?? 0) + 1);
    const aimed = new Map<Aim, number>();
    let incompleteAfterKill = 0;
    let tornTails = 0;
    let compactions = 0;
    let compacted = 0;
    let inflatedBytes = 0;
    let kills = 0;
    let cycle = 0;
    let cleanStops = 0;
    let afterCleanStop = false;
    try {
      const oracle = new BrokerOracle(
        join(tmp.path, "broker"),
        join(tmp.path, "state"),
        STREAM,
        TOPIC,
        [
          // Small 0.9 segments: one or two sealed per cycle, evicted soon after their copy.
          { partition: 0, format: "iggy-0.9", payloadSize: 256, segmentSize: 192 * KiB },
          // Large 0.8 segments (~11 MiB): multipart in three 5 MiB parts, evicted after the copy.
          { partition: 1, format: "iggy-0.8", payloadSize: 8000, segmentSize: 11 * MiB },
        ],
      );
      const [small, big] = oracle.partitions;
      await oracle.append(small, 2500, 1);
      await oracle.append(big, 1500, 2);
      const configPath = join(tmp.path, "tierd.toml");
      await writeFile(
        configPath,
        s3ConfigText({
          dir: tmp.path,
          minio,
          endpoint: tap.endpoint,
          topics: [{ stream: STREAM, topic: TOPIC, localRetentionSize: "1 MiB" }],
          logLevel: "debug",
          uploadConcurrency: 2,
        }),
      );
      const env = s3Env(minio);
      const tails = new Map(
        oracle.partitions.map((p) => [p.partition, new JournalTail(oracle.stateDirOf(p))]),
      );
      for (const p of oracle.partitions) {
        await Deno.mkdir(oracle.stateDirOf(p), { recursive: true });
      }
      events = watchTree(
        [join(tmp.path, "state"), join(tmp.path, "broker")],
        tails,
      );

      let appendSeed = 100;
      const appendSome = async (bigSegment: boolean) => {
        await oracle.append(small, 400 + Math.floor(random() * 600), appendSeed++);
        // A whole big segment when a multipart copy is wanted; otherwise a slice of one.
        await oracle.append(big, bigSegment ? 1450 : Math.floor(random() * 300), appendSeed++);
      };

      while (kills < MIN_KILLS || (kills < MAX_KILLS && Date.now() - started < KILL_BUDGET_MS)) {
        const aim: Aim = afterCleanStop ? AFTER_CLEAN_STOP : AIMS[cycle++ % AIMS.length];
        afterCleanStop = false;
        aimed.set(aim, (aimed.get(aim) ?? 0) + 1);
        if (aim === "compaction" && await inflateJournal(oracle, small)) {
          compactions++;
          inflatedBytes = (await oracle.journal(small)).bytes;
        }
        // Appends happen while the agent is down or just after it starts, alternately.
        const appendNow = cycle % 2 === 0;
        if (appendNow) await appendSome(MULTIPART_AIMS.has(aim));
        for (const tail of tails.values()) await tail.skipToEnd();
        events.reset();
        agent = spawnTierd(["run", "--config", configPath], env);
        const current = agent;
        let killedAt = "";
        const kill = (label: string) => {
          if (killedAt) return;
          killedAt = label;
          current.kill("SIGKILL");
        };
        const delayed = (label: string, maxMs: number) => {
          const ms = Math.floor(random() * maxMs);
          if (ms === 0) kill(label);
          else setTimeout(() => kill(label), ms);
        };
        // Arm the trigger before anything can happen.
        switch (aim) {
          case "immediately":
            delayed("immediately after spawn", 150);
            break;
          case "at boot":
            current.onLine((l) => l.msg === "store probe ok" && kill("store probe ok logged"));
            break;
          case "mid PUT":
            events.on((e) =>
              e.type === "copy_started" && e.partition === 0 && delayed("copy_started +0-20 ms", 20)
            );
            break;
          case "mid multipart":
            events.on((e) =>
              e.type === "multipart_started" && delayed("multipart_started +0-80 ms", 80)
            );
            break;
          case "after copy":
            current.onLine((l) => l.msg === "segment copied" && kill("segment copied logged"));
            break;
          case "marker write":
            events.on((e) =>
              e.type === "file" && /\.remote(\.tmp)?$/.test(e.path) && e.created &&
              kill("marker file created")
            );
            break;
          case "broker unlink":
            events.on((e) =>
              e.type === "file" && /\.log$/.test(e.path) && e.removed &&
              kill("broker .log unlinked")
            );
            break;
          case "after evicted":
            events.on((e) => e.type === "evicted" && kill("evicted journaled"));
            break;
          case "dangling journaled":
            events.on((e) => e.type === "dangling" && delayed("dangling journaled +0-10 ms", 10));
            break;
          case "delete_started journaled":
            events.on((e) => e.type === "delete_started" && kill("delete_started journaled"));
            break;
          case "UploadPart in flight": {
            let parts = 0;
            tap.on((e) =>
              e.op === "UploadPart" && e.phase === "request" && ++parts === 2 &&
              kill("2nd UploadPart request at MinIO")
            );
            break;
          }
          case "CreateMultipartUpload answered":
          case "CompleteMultipartUpload answered":
          case "AbortMultipartUpload answered":
          case "DeleteObjects answered": {
            const op = aim.split(" ")[0];
            tap.on((e) =>
              e.op === op && e.phase === "response" && kill(`${op} done, answer held back`)
            );
            break;
          }
          case ".index PutObject answered":
            tap.on((e) =>
              e.op === "PutObject" && e.phase === "response" && e.key.endsWith(".index") &&
              kill(".index PutObject done, answer held back")
            );
            break;
          case "compaction":
            events.on((e) =>
              e.type === "file" && /journal\.tmp$/.test(e.path) && kill("journal.tmp created")
            );
            break;
          case "random":
            delayed("random 0-1500 ms", 1500);
            break;
          case AFTER_CLEAN_STOP:
            current.onLine((l) =>
              l.msg.startsWith("markers trusted from the clean-stop record") &&
              delayed("markers trusted at boot +0-300 ms", 300)
            );
            break;
        }
        if (!appendNow) {
          await sleep(Math.floor(random() * 200));
          await appendSome(MULTIPART_AIMS.has(aim));
        }
        // Without its trigger within a few seconds, a kill lands at a random later moment.
        const fallback = setTimeout(() => delayed("fallback (trigger not seen)", 500), 6000);
        const status = await current.status;
        clearTimeout(fallback);
        events.on(undefined);
        tap.on(undefined);
        current.onLine(undefined);
        agent = undefined;
        assert.ok(
          killedAt,
          `agent exited on its own (code ${status.code}):\n${current.output().slice(-3000)}`,
        );
        assert.equal(status.signal, "SIGKILL");
        kills++;
        const failures = current.lines.filter((l) => l.msg === "partition pass failed");
        assert.deepEqual(failures, [], `a partition pass failed:\n${JSON.stringify(failures)}`);
        const last = await lastEvents(oracle);
        land(`${killedAt} / last journaled: ${last}`);
        if ((await store.listMultipartUploads("iggy/")).length > 0) incompleteAfterKill++;
        const check = await oracle.checkInvariants(store, `after kill ${kills} (${killedAt})`);
        if (inflatedBytes > 0 && (await oracle.journal(small)).bytes < inflatedBytes) {
          compacted++; // the agent finished a compaction before this kill
          inflatedBytes = 0;
        }
        tornTails += check.torn;
        // Every few kills, restart, let the agent settle and stop it cleanly: the next boot
        // takes the clean-stop record it wrote, and is killed while its first pass reads the
        // markers that boot trusted.
        if (kills % 8 === 0) {
          agent = spawnTierd(["run", "--config", configPath], env);
          // Up and past its first pass (a SIGTERM before the handlers are in is a kill).
          await agent.waitFor((l) => l.msg === "first pass done", 60_000);
          await settle(oracle, agent, 60_000);
          agent.kill("SIGTERM");
          const stopped = await agent.status;
          assert.equal(stopped.code, 0, `SIGTERM exit:\n${agent.output().slice(-2000)}`);
          agent = undefined;
          await Deno.stat(join(tmp.path, "state", "clean_stop")); // the record is there
          cleanStops++;
          afterCleanStop = true;
          land("settled, then stopped cleanly");
          await oracle.checkInvariants(store, `after clean stop ${cleanStops}`);
        }
      }

      // The end: settle with the store healthy, SIGTERM (exit 0, promptly), then run --once.
      await appendSome(true);
      agent = spawnTierd(["run", "--config", configPath], env);
      await settle(oracle, agent, 90_000);
      const termAt = Date.now();
      agent.kill("SIGTERM");
      const term = await agent.status;
      const termMs = Date.now() - termAt;
      assert.equal(term.code, 0, `SIGTERM exit:\n${agent.output().slice(-2000)}`);
      assert.ok(termMs < 10_000, `SIGTERM took ${termMs} ms`);
      agent = undefined;
      const once = await runTierd(["run", "--once", "--config", configPath], env);
      assert.equal(once.code, 0, once.stderr);
      oracle.forgetVerified(); // read every object back once more
      const final = await oracle.checkInvariants(store, "at the end");
      for (const p of oracle.partitions) {
        const { state } = await oracle.journal(p);
        const stuck = [...state.segments.values()].flatMap((m) => [...m.values()])
          .filter((r) =>
            r.state !== "COPY_SEGMENT_FINISHED" && r.state !== "DELETE_SEGMENT_FINISHED"
          );
        assert.deepEqual(stuck, [], `partition ${p.partition}: unfinished records at the end`);
        for (const s of oracle.chain(p)) {
          assert.equal(
            getSegment(state, 0n, s.start)?.state,
            "COPY_SEGMENT_FINISHED",
            `partition ${p.partition}: sealed segment ${s.start} not copied`,
          );
        }
        assert.ok(
          (await oracle.brokerLogs(p)).size < oracle.chain(p).length + 1,
          `partition ${p.partition}: nothing was ever evicted`,
        );
      }
      if (compactions > 0) {
        const { bytes } = await oracle.journal(small);
        assert.ok(bytes < 1024 * 1024, `the inflated journal was never compacted (${bytes} B)`);
      }
      const leftover = await store.listMultipartUploads("iggy/");
      assert.deepEqual(
        leftover,
        [],
        `incomplete multipart uploads:\n${await uploadHistory(oracle, leftover)}`,
      );

      const report = [
        `kills: ${kills} in ${((Date.now() - started) / 1000).toFixed(0)} s (seed ${seed}), ` +
        `clean stops between them: ${cleanStops}`,
        `aims: ${[...aimed].map(([a, n]) => `${a} ×${n}`).join(", ")}`,
        `kills leaving an incomplete multipart upload behind: ${incompleteAfterKill}`,
        `journals with a torn tail after a kill: ${tornTails}`,
        `journal compactions set up: ${compactions}, seen completed: ${compacted}`,
        `segments: ${final.copied} copied, ${final.evicted} evicted; ` +
        `broker .index files left without their .log: ${final.orphanIndexes}`,
        "landed:",
        ...[...landings].sort().map(([w, n]) => `  ${n} × ${w}`),
        `SIGTERM exit took ${termMs} ms`,
      ];
      console.error(report.join("\n"));
    } catch (err) {
      console.error(
        `failed after ${kills} kills; landings so far:\n` +
          [...landings].sort().map(([w, n]) => `  ${n} × ${w}`).join("\n"),
      );
      throw err;
    } finally {
      agent?.kill("SIGKILL");
      await agent?.status;
      events?.close();
      await tap.close();
      await minio.stop();
      if (Deno.env.get("TIERD_KEEP_TMP")) console.error(`kept ${tmp.path}`);
      else await tmp.cleanup();
    }
  });
} else {
  Deno.test({ name: "kill test against MinIO (skipped: no MinIO)", ignore: true, fn() {} });
}

/** Something the test saw the agent do: a journaled event, or a file created or removed. */
type Happening =
  | { type: JournalEvent["type"]; partition: number }
  | { type: "file"; path: string; created: boolean; removed: boolean };

interface TreeEvents {
  /** Sets the one handler (undefined: none). */
  on(handler: ((h: Happening) => void) | undefined): void;
  /** Drops queued work from an earlier agent. */
  reset(): void;
  close(): void;
}

/** Reads the records appended to a journal since the last read. */
class JournalTail {
  #offset = 0;
  #ino: number | null = null;
  #queue: Promise<unknown> = Promise.resolve();
  constructor(readonly dir: string) {}

  get path(): string {
    return join(this.dir, "journal");
  }

  /** Starts reading after what is there now. */
  skipToEnd(): Promise<void> {
    const run = this.#queue.then(async () => {
      const info = await Deno.stat(this.path).catch(() => undefined);
      this.#offset = info?.size ?? 0;
      this.#ino = info?.ino ?? null;
    });
    this.#queue = run.catch(() => {});
    return run;
  }

  /** New events since the last call (none across a compaction: the snapshot is old news). */
  next(): Promise<JournalEvent[]> {
    const run = this.#queue.then(async () => {
      let file: Deno.FsFile;
      try {
        file = await Deno.open(this.path);
      } catch {
        return [];
      }
      try {
        const info = await file.stat();
        if (info.ino !== this.#ino || info.size < this.#offset) {
          this.#ino = info.ino;
          this.#offset = info.size;
          return [];
        }
        const bytes = new Uint8Array(info.size - this.#offset);
        await file.seek(this.#offset, Deno.SeekMode.Start);
        let read = 0;
        while (read < bytes.length) {
          const n = await file.read(bytes.subarray(read));
          if (n === null) break;
          read += n;
        }
        const decoded = decodeRecords(bytes.subarray(0, read));
        this.#offset += decoded.validBytes;
        return decoded.events;
      } finally {
        file.close();
      }
    });
    this.#queue = run.catch(() => {});
    return run;
  }
}

/** Watches the state and broker trees and turns what happens there into {@link Happening}s. */
function watchTree(dirs: string[], tails: Map<number, JournalTail>): TreeEvents {
  const watcher = Deno.watchFs(dirs, { recursive: true });
  let handler: ((h: Happening) => void) | undefined;
  let epoch = 0;
  const emit = (h: Happening) => handler?.(h);
  (async () => {
    for await (const event of watcher) {
      const mine = epoch;
      for (const path of event.paths) {
        const created = event.kind === "create";
        const removed = event.kind === "remove";
        if (created || removed) emit({ type: "file", path, created, removed });
        for (const [partition, tail] of tails) {
          if (path !== tail.path || removed) continue;
          tail.next().then((events) => {
            if (epoch !== mine) return;
            for (const e of events) emit({ type: e.type, partition });
          });
        }
      }
    }
  })().catch(() => {});
  return {
    on: (h) => (handler = h),
    reset: () => epoch++,
    close: () => watcher.close(),
  };
}

/**
 * Appends ~1.1 MiB of legal history (copy attempts that failed and were cleaned up, on the not
 * yet sealed active segment) to a stopped agent's journal, so its next pass compacts the journal.
 * @returns 1 when the journal was inflated, 0 when the active segment already has a record
 */
async function inflateJournal(oracle: BrokerOracle, p: OraclePartition): Promise<number> {
  const { journal, events } = await Journal.open(join(oracle.stateDirOf(p), "journal"));
  try {
    const state = fold(events);
    const rec = getSegment(state, state.generation, p.active);
    if (rec && !(rec.state === "DELETE_SEGMENT_FINISHED" && rec.deleteCause === "dangling")) {
      return 0;
    }
    const at = Date.now();
    const id = { segment: p.active, generation: state.generation, at };
    const reason = "test: simulated failed copy ".padEnd(480, "x");
    const batch: JournalEvent[] = [];
    for (let i = 0; i < 1400; i++) {
      batch.push(
        { type: "copy_started", ...id },
        { type: "dangling", ...id, reason },
        { type: "delete_started", ...id, cause: "dangling" },
        { type: "delete_finished", ...id },
      );
    }
    await journal.append(...batch);
    assert.ok(journal.size > 1024 * 1024, `inflated journal is only ${journal.size} bytes`);
    return 1;
  } finally {
    await journal.close();
  }
}

/** The most recently journaled event over all partitions, e.g. `copy_started@p1`. */
async function lastEvents(oracle: BrokerOracle): Promise<string> {
  let best: { at: number; text: string } | undefined;
  for (const p of oracle.partitions) {
    const bytes = await Deno.readFile(join(oracle.stateDirOf(p), "journal")).catch(() =>
      new Uint8Array()
    );
    const last = decodeRecords(bytes).events.at(-1);
    if (last && (!best || last.at >= best.at)) {
      best = { at: last.at, text: `${last.type}@p${p.partition}` };
    }
  }
  return best?.text ?? "nothing";
}
