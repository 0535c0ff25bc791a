// The run loop's watch, on a real directory laid out like Iggy's: the broker's own writes to
// `logs/`, `state/` and `metadata/` (and to a topic tierd does not tier) wake nothing; a
// tiered partition's segments and consumer offsets do, and so does a new partition, which the
// next arming then watches; a partition that goes away is no longer watched.
import assert from "node:assert/strict";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PartitionWatch, topicChain, type WatchFn } from "../../src/agent/partition_watch.ts";
import { capturingLogger } from "../_model/tier_harness.ts";
import { tempDir } from "../_util.ts";

/** Counts wake-ups; `settle()` waits until events stop, `expect*` check the count since. */
class Wakes {
  count = 0;
  readonly fn = () => void this.count++;

  /** Waits until no event came for `quietMs` (at most `maxMs`), then starts counting afresh. */
  async settle(quietMs = 300, maxMs = 3000): Promise<void> {
    const end = Date.now() + maxMs;
    let seen = -1;
    while (seen !== this.count && Date.now() < end) {
      seen = this.count;
      await new Promise((r) => setTimeout(r, quietMs));
    }
    this.count = 0;
  }

  /** Resolves once a wake-up came (fails after `ms`). */
  async expectWake(what: string, ms = 3000): Promise<void> {
    const end = Date.now() + ms;
    while (this.count === 0) {
      if (Date.now() > end) assert.fail(`no wake-up after ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await this.settle();
  }

  /** No wake-up for `ms`. */
  async expectNone(what: string, ms = 600): Promise<void> {
    await new Promise((r) => setTimeout(r, ms));
    assert.equal(this.count, 0, `${what} woke the loop`);
  }
}

/** An Iggy-like data dir: the broker's own folders, topic 0/0 (tiered) and 0/1 (not). */
async function brokerDir(root: string) {
  const data = join(root, "local_data");
  const part = (t: number, p: number) => join(data, `streams/0/topics/${t}/partitions/${p}`);
  for (const d of ["logs", "state", "metadata", "runtime"]) {
    await mkdir(join(data, d), { recursive: true });
  }
  for (const p of [0, 1]) {
    await mkdir(join(part(0, p), "offsets", "consumers"), { recursive: true });
  }
  await mkdir(part(1, 0), { recursive: true });
  return { data, part };
}

Deno.test("watch: the broker's own files wake nothing; a tiered partition's files and new partitions do", async () => {
  const tmp = await tempDir("tierd-watch");
  const { logger, lines } = capturingLogger();
  const wakes = new Wakes();
  const { data, part } = await brokerDir(tmp.path);
  const watch = new PartitionWatch(data, [{ stream: 0, topic: 0 }], wakes.fn, { logger });
  try {
    await watch.arm([part(0, 0), part(0, 1)]);
    assert.deepEqual(
      watch.watched,
      new Map([
        [part(0, 0), true],
        [part(0, 1), true],
        [join(data, "streams/0/topics/0/partitions"), false],
      ]),
    );
    await wakes.settle();

    // What Iggy writes on every DeleteSegments call, and everything else it writes for itself.
    await writeFile(join(data, "logs", "iggy-server.log"), "WARN segment retained\n", {
      flag: "a",
    });
    await writeFile(join(data, "state", "log"), "entry", { flag: "a" });
    await writeFile(join(data, "metadata", "journal.wal"), "entry", { flag: "a" });
    await writeFile(join(data, "runtime", "current_config.toml"), "[http]\n");
    await writeFile(join(part(1, 0), "00000000000000000000.log"), "untiered topic");
    await wakes.expectNone("the broker's own files");

    await writeFile(join(part(0, 0), "00000000000000000000.log"), "records", { flag: "a" });
    await wakes.expectWake("a segment write");
    await writeFile(join(part(0, 1), "offsets", "consumers", "1"), new Uint8Array(8));
    await wakes.expectWake("a consumer offset stored");

    // A new partition wakes the loop; once armed again, its own files do.
    await mkdir(part(0, 2));
    await wakes.expectWake("a new partition directory");
    await watch.arm([part(0, 0), part(0, 1), part(0, 2)]);
    await wakes.settle();
    await writeFile(join(part(0, 2), "00000000000000000000.log"), "records");
    await wakes.expectWake("a write in the new partition");

    // A partition that went away is not watched any more.
    await rm(part(0, 1), { recursive: true });
    await wakes.settle();
    await watch.arm([part(0, 0), part(0, 2)]);
    assert.equal(watch.watched.has(part(0, 1)), false);
    assert.equal(watch.watched.get(part(0, 2)), true);
    assert.deepEqual(lines.filter((l) => l.level !== "info"), []);
  } finally {
    watch.close();
    await tmp.cleanup();
  }
});

Deno.test("watch: before the topic exists, the deepest existing folder on its way is watched, not recursively", async () => {
  const tmp = await tempDir("tierd-watch");
  const { logger } = capturingLogger();
  const wakes = new Wakes();
  const data = join(tmp.path, "local_data");
  await mkdir(join(data, "logs"), { recursive: true });
  const watch = new PartitionWatch(data, [{ stream: 3, topic: 1 }], wakes.fn, { logger });
  try {
    await watch.arm([]);
    assert.deepEqual(watch.watched, new Map([[data, false]]));
    await wakes.settle();
    await writeFile(join(data, "logs", "iggy-server.log"), "INFO started\n");
    await wakes.expectNone("the broker's log");
    await mkdir(join(data, "streams", "3", "topics"), { recursive: true });
    await wakes.expectWake("the streams folder");
    await watch.arm([]);
    assert.deepEqual(watch.watched, new Map([[join(data, "streams/3/topics"), false]]));
    const chain = topicChain(data, { stream: 3, topic: 1 });
    assert.equal(chain.at(-1), join(data, "streams/3/topics/1/partitions"));
  } finally {
    watch.close();
    await tmp.cleanup();
  }
});

Deno.test("watch: a directory that cannot be watched is said once and left to the periodic scan", async () => {
  const tmp = await tempDir("tierd-watch");
  const { logger, lines } = capturingLogger();
  const { data, part } = await brokerDir(tmp.path);
  const refusing: WatchFn = () => {
    throw new Error("ENOSPC: inotify watch limit reached");
  };
  const watch = new PartitionWatch(data, [{ stream: 0, topic: 0 }], () => {}, {
    logger,
    watch: refusing,
  });
  try {
    await watch.arm([part(0, 0)]);
    await watch.arm([part(0, 0)]);
    assert.equal(watch.watched.size, 0);
    const warned = lines.filter((l) =>
      l.msg === "filesystem watch unavailable; relying on the periodic scan"
    );
    assert.deepEqual(
      warned.map((l) => l.path).sort(),
      [part(0, 0), join(data, "streams/0/topics/0/partitions")].sort(),
    );
  } finally {
    watch.close();
    await tmp.cleanup();
  }
});

Deno.test("watch: a watch that ends by itself wakes the loop and is started again by the next arming", async () => {
  const tmp = await tempDir("tierd-watch");
  const { logger } = capturingLogger();
  const { data, part } = await brokerDir(tmp.path);
  const ends: (() => void)[] = [];
  let started = 0;
  const fake: WatchFn = (_path, _o, _change, onEnd) => {
    started++;
    ends.push(onEnd);
    return { close() {} };
  };
  let wakes = 0;
  const watch = new PartitionWatch(data, [{ stream: 0, topic: 0 }], () => void wakes++, {
    logger,
    watch: fake,
  });
  try {
    await watch.arm([part(0, 0)]);
    assert.equal(started, 2);
    ends[0]();
    assert.equal(wakes, 1);
    assert.equal(watch.watched.size, 1);
    await watch.arm([part(0, 0)]);
    assert.equal(started, 3, "only the ended watch is started again");
  } finally {
    watch.close();
    await tmp.cleanup();
  }
});
