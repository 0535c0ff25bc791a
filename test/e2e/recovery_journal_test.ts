// Issue 10's damage table, the journal rows: one flipped byte in the first record, mid-file and
// in the last record; the journal truncated to half (and at the cuts that hurt most); a valid
// record written twice; the journal replaced by a directory. Each on a partition evicted mostly
// to an fs store, damaged, then a fresh agent booted on it: the partition says it was rebuilt,
// naming the file and byte; the damaged journal is kept aside as it was; an error line names the
// file and position; every generated offset reads back byte-identical through the HTTP API, and
// nothing is reported lost. One row goes through the real `tierd run`.
import assert from "node:assert/strict";
import { readFile, truncate } from "node:fs/promises";
import { join } from "node:path";
import { RECORD_HEADER_SIZE } from "../../src/state/journal.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import type { FormatName } from "../../src/format/types.ts";
import { fold, segmentsOf } from "../../src/state/segment_state.ts";
import {
  type Api,
  assertEverythingReadable,
  bootAgent,
  concat,
  damagedJournals,
  flipByte,
  journalPositions,
  journalState,
  logged,
  partitionEntry,
  type RecoveryRig,
  recoveryRig,
  replaceByDirectory,
  runAgent,
} from "./_recovery.ts";

/** What a journal damage did to the file, for the checks. */
interface Damage {
  /** Byte position of the first bad record, when there is one. */
  position?: number;
  /** The damaged journal's bytes (undefined: it is a directory). */
  bytes?: Uint8Array;
}

/** Damages the rig's journal and says where. */
type Damager = (rig: RecoveryRig) => Promise<Damage>;

/** The record holding byte `at`. */
function recordAt(positions: readonly number[], at: number): number {
  return positions.filter((p) => p <= at).at(-1)!;
}

async function flipAt(rig: RecoveryRig, pick: (positions: number[], size: number) => number) {
  const positions = await journalPositions(rig);
  const size = (await Deno.stat(rig.journal)).size;
  const at = pick(positions, size);
  await flipByte(rig.journal, at);
  return { position: recordAt(positions, at), bytes: new Uint8Array(await readFile(rig.journal)) };
}

const DAMAGES: { name: string; format: FormatName; damage: Damager; reason: RegExp }[] = [
  {
    name: "one flipped byte in the first record",
    format: "iggy-0.9",
    damage: (rig) => flipAt(rig, () => RECORD_HEADER_SIZE + 7),
    reason: /checksum mismatch/,
  },
  {
    name: "one flipped byte mid-file",
    format: "iggy-0.8",
    damage: (rig) => flipAt(rig, (_p, size) => Math.floor(size / 2)),
    reason: /checksum mismatch/,
  },
  {
    name: "one flipped byte in the last record",
    format: "iggy-0.9",
    damage: (rig) => flipAt(rig, (p) => p.at(-1)! + RECORD_HEADER_SIZE + 3),
    reason: /checksum mismatch/,
  },
  {
    name: "a valid record written twice",
    format: "iggy-0.8",
    damage: async (rig) => {
      const bytes = new Uint8Array(await readFile(rig.journal));
      const { events, positions } = decodeRecords(bytes);
      // A copy_finished in the middle, repeated right after itself: every record checks out.
      const i = events.findIndex((e, i) => e.type === "copy_finished" && i > events.length / 3);
      const record = bytes.subarray(positions[i], positions[i + 1]);
      const doubled = concat([
        bytes.subarray(0, positions[i + 1]),
        record,
        bytes.subarray(positions[i + 1]),
      ]);
      await Deno.writeFile(rig.journal, doubled);
      return { position: positions[i + 1], bytes: doubled };
    },
    reason: /record \d+: illegal copy_finished/,
  },
  {
    name: "the journal replaced by a directory",
    format: "iggy-0.9",
    damage: async (rig) => {
      await replaceByDirectory(rig.journal);
      return {};
    },
    reason: /not a file \(EISDIR\)/,
  },
];

/** The checks of a damaged-journal row, on an agent booted after the damage. */
async function assertRebuiltFromDamage(
  rig: RecoveryRig,
  api: Api,
  lines: readonly { level: string; msg: string; [k: string]: unknown }[],
  damage: Damage,
  reason: RegExp,
  incarnation: string | null,
): Promise<void> {
  // Loud: one error line naming the file and the byte.
  const errors = logged(lines, "error", /journal damaged/);
  assert.equal(errors.length, 1, JSON.stringify(lines));
  assert.equal(errors[0].path, rig.journal);
  assert.equal(errors[0].position, damage.position);
  assert.match(String(errors[0].reason), reason);
  // Kept aside, as it was.
  const kept = await damagedJournals(rig);
  assert.equal(kept.length, 1, `kept aside: ${kept}`);
  assert.equal(errors[0].kept_at, join(rig.stateDir, kept[0]));
  if (damage.bytes) {
    assert.deepEqual(new Uint8Array(await readFile(join(rig.stateDir, kept[0]))), damage.bytes);
  } else {
    assert.ok((await Deno.stat(join(rig.stateDir, kept[0]))).isDirectory);
  }
  // Said on /v1/partitions, naming the file and the byte.
  const p = await partitionEntry(api, rig.id);
  assert.equal(p.state, "rebuilt");
  const detail = p.state_detail ?? "";
  assert.ok(detail.includes(rig.journal), detail);
  if (damage.position !== undefined) {
    assert.ok(detail.includes(`byte ${damage.position}`), detail);
  }
  assert.ok(detail.includes(kept[0]), detail);
  // The same partition, not a new one: the bucket's incarnation was taken back.
  assert.equal(p.incarnation, incarnation);
  // The rebuilt journal knows every copy, evicted ones as evicted.
  const state = await journalState(rig);
  assert.deepEqual(
    segmentsOf(state).filter((r) => r.evicted).map((r) => r.start),
    rig.evicted,
  );
  const metrics = await (await api("/metrics")).text();
  assert.match(metrics, /^tierd_journals_damaged_total 1$/m);
  assert.match(metrics, /^tierd_state_rebuilds_total 1$/m);
  await assertEverythingReadable(rig, api);
}

for (const row of DAMAGES) {
  Deno.test(`damaged journal (${row.format}): ${row.name} → rebuilt from the bucket, nothing lost`, async () => {
    const rig = await recoveryRig({ format: row.format, store: { kind: "fs" } });
    try {
      const incarnation = (await journalState(rig)).incarnation!.toString(16).padStart(16, "0");
      const damage = await row.damage(rig);
      const agent = await bootAgent(rig);
      try {
        assert.deepEqual(agent.report.problems, []);
        assert.equal(agent.report.lost, 0);
        await assertRebuiltFromDamage(rig, agent.api, agent.lines, damage, row.reason, incarnation);
      } finally {
        await agent.close();
      }
    } finally {
      await rig.cleanup();
    }
  });
}

/**
 * Where a truncation cuts: the "to half", plus the cuts that leave the most behind —
 * right after an evicted segment's copy_started (its copy_finished and evicted are gone, so it
 * looks like a copy cut off by a crash, with no local files to copy again), right after the
 * floor, and inside the evictions.
 */
const CUTS: { name: string; format: FormatName; cut: (bytes: Uint8Array) => number }[] = [
  { name: "to half", format: "iggy-0.8", cut: (b) => Math.floor(b.length / 2) },
  {
    name: "right after an evicted segment's copy_started",
    format: "iggy-0.9",
    cut: (b) => {
      const { events, positions } = decodeRecords(b);
      const starts = events.filter((e) => e.type === "copy_started");
      const i = events.indexOf(starts[Math.floor(starts.length / 2)]);
      return positions[i + 1];
    },
  },
  {
    name: "right after the floor",
    format: "iggy-0.8",
    cut: (b) => {
      const { events, positions } = decodeRecords(b);
      return positions[events.findIndex((e) => e.type === "floor") + 1];
    },
  },
  {
    name: "inside the evictions, mid-record",
    format: "iggy-0.9",
    cut: (b) => {
      const { events, positions } = decodeRecords(b);
      const i = events.findLastIndex((e) => e.type === "evicted") - 2;
      return positions[i] + 20;
    },
  },
];

for (const c of CUTS) {
  Deno.test(`journal truncated ${c.name} (${c.format}) → the bucket fills in, nothing lost`, async () => {
    const rig = await recoveryRig({ format: c.format, store: { kind: "fs" } });
    try {
      const before = await journalState(rig);
      const bytes = new Uint8Array(await readFile(rig.journal));
      const cut = c.cut(bytes);
      const kept = decodeRecords(bytes.subarray(0, cut));
      await truncate(rig.journal, cut);
      const agent = await bootAgent(rig);
      try {
        assert.deepEqual(agent.report.problems, []);
        assert.equal(agent.report.lost, 0);
        // An incomplete last record is a torn tail (a journal cut short cannot be told from an
        // interrupted append): cut off and said, at warn, naming the file and where.
        const torn = logged(agent.lines, "warn", /torn tail/);
        if (kept.torn) {
          assert.equal(torn.length, 1, JSON.stringify(agent.lines));
          assert.equal(torn[0].path, rig.journal);
          assert.equal(torn[0].valid_bytes, kept.validBytes);
        } else {
          assert.equal(torn.length, 0);
        }
        assert.deepEqual(await damagedJournals(rig), []);
        const p = await partitionEntry(agent.api, rig.id);
        const incarnation = before.incarnation!.toString(16).padStart(16, "0");
        assert.equal(p.incarnation, incarnation, "the same incarnation");
        const state = await journalState(rig);
        assert.deepEqual(
          segmentsOf(state).filter((r) => r.evicted).map((r) => r.start),
          rig.evicted,
          "every evicted segment known again",
        );
        // What the cut journal no longer knew came back, and the partition says from where:
        // copies it had no record of from the bucket (state "rebuilt"), evictions it lacked
        // from their markers.
        const cutState = fold(kept.events);
        const records = segmentsOf(cutState).length;
        const evictions = segmentsOf(cutState).filter((r) => r.evicted).length;
        const detail = p.state_detail ?? "";
        assert.equal(p.state, records < rig.logs.size - 1 ? "rebuilt" : "ok", JSON.stringify(p));
        if (records < rig.logs.size - 1) assert.match(detail, /adopted from the bucket/);
        if (evictions < rig.evicted.length && records === rig.logs.size - 1) {
          assert.match(detail, /evictions the journal lacked recorded from their markers/);
        }
        if (kept.torn) assert.ok(detail.includes(`cut at byte ${kept.validBytes}`), detail);
        await assertEverythingReadable(rig, agent.api);
      } finally {
        await agent.close();
      }
    } finally {
      await rig.cleanup();
    }
  });
}

Deno.test("damaged journal through the real `tierd run`: error line, /v1/partitions, every offset over HTTP", async () => {
  const rig = await recoveryRig({ format: "iggy-0.9", store: { kind: "fs" } });
  try {
    const incarnation = (await journalState(rig)).incarnation!.toString(16).padStart(16, "0");
    const damage = await flipAt(rig, (p) => p[Math.floor(p.length / 3)] + RECORD_HEADER_SIZE + 1);
    const agent = await runAgent(rig);
    try {
      await assertRebuiltFromDamage(
        rig,
        agent.api,
        agent.process.lines,
        damage,
        /checksum mismatch/,
        incarnation,
      );
    } finally {
      const status = await agent.stop();
      assert.equal(status.code, 0, agent.process.output().slice(-2000));
    }
  } finally {
    await rig.cleanup();
  }
});
