// A read answers from a journal only while the broker's partition is the one the journal
// describes: after the broker's metadata log grew, it asks the broker when it created the
// partition, and a partition created again (a topic deleted and recreated under the same ids)
// is "retry" until the agent has settled it — never the deleted partition's messages.
import assert from "node:assert/strict";
import { appendFile, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PartitionRebuilding, UnknownPartition } from "../../src/read/errors.ts";
import { type BirthSubject, PartitionBirths } from "../../src/read/partition_births.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";

const ID = { stream: 1, topic: 2, partition: 0 };
const LABEL = "1/2/0";

async function broker(dataDir: string) {
  const log = join(dataDir, "metadata/journal.wal");
  await mkdir(join(log, ".."), { recursive: true });
  await writeFile(log, new Uint8Array(100));
  let birth: number | undefined | Error = 1_000_000_000_000_000;
  const asked: number[] = [];
  const births = new PartitionBirths(dataDir, () => {
    asked.push(Date.now());
    return birth instanceof Error ? Promise.reject(birth) : Promise.resolve(birth);
  }, { timeoutMs: 5_000 });
  return {
    births,
    asked,
    /** The broker answers `b` from now on (its metadata log grows with the change). */
    async recreate(b: number | undefined | Error, grow = true) {
      birth = b;
      if (grow) await appendFile(log, new Uint8Array(64));
    },
  };
}

const tiered = (generation = 0): BirthSubject => ({
  journal: `00000000000000aa-${generation}`,
  hasCopies: true,
  localMtimesMs: [Date.now()],
});

const rebuilding = (why: RegExp) => (e: unknown) =>
  e instanceof PartitionRebuilding && e.retryAfterSeconds === 1 && why.test(e.message);

Deno.test("partition births: the broker is asked once per change of its metadata journal", async () => {
  const tmp = await tempDir();
  try {
    const b = await broker(tmp.path);
    await b.births.check(ID, LABEL, tiered());
    await b.births.check(ID, LABEL, tiered());
    assert.equal(b.asked.length, 1, "metadata unchanged: not asked again");
    await b.recreate(1_000_000_000_000_000); // e.g. an eviction: the same partition
    await Promise.all([1, 2, 3].map(() => b.births.check(ID, LABEL, tiered())));
    assert.equal(b.asked.length, 2, "one question for the reads at the same metadata");
    await b.births.check(ID, LABEL, tiered(1));
    assert.equal(b.asked.length, 3, "a new journal state is confirmed too");
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("partition births: deleted, then recreated: unknown, then retry until the agent settled it", async () => {
  const tmp = await tempDir();
  try {
    const b = await broker(tmp.path);
    await b.births.check(ID, LABEL, tiered());
    await b.recreate(undefined);
    await assert.rejects(
      b.births.check(ID, LABEL, tiered()),
      (e) => e instanceof UnknownPartition && /no such partition now/.test(e.message),
    );
    const birth = Date.now() - 1_000;
    await b.recreate(birth * 1000);
    const at = new Date(birth).toISOString();
    for (let i = 0; i < 2; i++) {
      await assert.rejects(
        b.births.check(ID, LABEL, tiered()),
        rebuilding(new RegExp(`created it again at ${at}; nothing is answered from`)),
      );
    }
    // The agent has settled it (a new generation): the new birth is this journal's.
    await b.births.check(ID, LABEL, tiered(1));
    await b.recreate(birth * 1000);
    await b.births.check(ID, LABEL, tiered(1));
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("partition births: without copies, the deleted partition's segment files are what is refused", async () => {
  const tmp = await tempDir();
  try {
    const b = await broker(tmp.path);
    const now = Date.now();
    const local = (mtimes: number[]): BirthSubject => ({ hasCopies: false, localMtimesMs: mtimes });
    await b.births.check(ID, LABEL, local([now - 60_000, now - 30_000]));
    await b.recreate(now * 1000);
    // The reconciler has not removed the old files yet.
    await assert.rejects(
      b.births.check(ID, LABEL, local([now - 60_000, now - 30_000])),
      rebuilding(/still holds the deleted partition's segment files/),
    );
    // The new partition's first segment, stamped by the kernel's coarse clock just before.
    await b.births.check(ID, LABEL, local([now - 5]));
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("partition births: a broker that cannot be asked after its metadata changed is retry, never a guess", async () => {
  const tmp = await tempDir();
  try {
    const b = await broker(tmp.path);
    await b.births.check(ID, LABEL, tiered());
    await b.recreate(new Error("broker http://127.0.0.1:3000 unreachable: connection refused"));
    await assert.rejects(
      b.births.check(ID, LABEL, tiered()),
      rebuilding(/could not be asked .*: broker http:\/\/127.0.0.1:3000 unreachable/),
    );
    await b.recreate(1_000_000_000_000_000, false);
    await b.births.check(ID, LABEL, tiered());
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("partition births: a 0.8 broker (no metadata journal, created_at anew at each boot) is never asked", async () => {
  const tmp = await tempDir();
  try {
    await mkdir(join(tmp.path, "state"), { recursive: true });
    await writeFile(join(tmp.path, "state", "log"), new Uint8Array(100));
    let asked = 0;
    const births = new PartitionBirths(tmp.path, () => Promise.resolve(++asked), {
      timeoutMs: 5_000,
    });
    await births.check(ID, LABEL, tiered());
    await appendFile(join(tmp.path, "state", "log"), new Uint8Array(64));
    await births.check(ID, LABEL, tiered());
    assert.equal(asked, 0);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("partition births: a broker that never answers is retry after the timeout, and the next read asks again", async () => {
  const tmp = await tempDir();
  try {
    await mkdir(join(tmp.path, "metadata"), { recursive: true });
    await writeFile(join(tmp.path, "metadata", "journal.wal"), new Uint8Array(100));
    const clock = new FakeClock(Date.now());
    const signals: AbortSignal[] = [];
    const broker: { answer?: number } = {};
    const births = new PartitionBirths(tmp.path, (_id, signal) => {
      signals.push(signal);
      return broker.answer === undefined ? new Promise(() => {}) : Promise.resolve(broker.answer);
    }, { timeoutMs: 2_000, clock });
    const hung = births.check(ID, LABEL, tiered());
    await new Promise((r) => setTimeout(r, 10)); // the question is out
    clock.advance(2_000);
    await assert.rejects(hung, rebuilding(/did not answer within 2000 ms/));
    assert.equal(signals[0].aborted, true, "the question itself was given up");
    broker.answer = 1_000_000_000_000_000;
    await births.check(ID, LABEL, tiered());
    assert.equal(signals.length, 2);
  } finally {
    await tmp.cleanup();
  }
});
