// The read path's listing of a broker partition directory is reused while the directory is
// unchanged, yet a reader always sees what the broker did: the active segment's growth at
// once, a new or deleted segment at once, anything else within LISTING_REUSE_MS.
import assert from "node:assert/strict";
import { appendFile, rm, stat, truncate, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { segmentStem } from "../../src/layout/partition.ts";
import { listSegments } from "../../src/partition/segments.ts";
import {
  LISTING_REUSE_MS,
  LISTING_SETTLED_MS,
  LocalListings,
} from "../../src/read/local_listing.ts";
import { systemClock } from "../../src/base/clock.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";

async function segment(dir: string, start: bigint, bytes: number) {
  await writeFile(join(dir, `${segmentStem(start)}.log`), new Uint8Array(bytes));
  await writeFile(join(dir, `${segmentStem(start)}.index`), new Uint8Array(16));
}

async function listed(listings: LocalListings, dir: string) {
  return await listings.list(dir, await stat(dir), 0);
}

const shape = (segs: { start: bigint; logSize: number; sealed: boolean }[]) =>
  segs.map((s) => `${s.start}:${s.logSize}:${s.sealed ? "sealed" : "open"}`);

Deno.test("a reused listing shows the active segment's growth and every new or deleted segment", async () => {
  const tmp = await tempDir();
  try {
    const dir = tmp.path;
    // The real clock: whether a listing may be reused depends on the kernel's mtimes.
    const listings = new LocalListings(systemClock);
    // Each listing is taken once the directory's last change has settled (as a reader's next
    // request usually is), so it is kept and reused; every change after it shows all the same.
    const settledListing = async () => {
      await new Promise((r) => setTimeout(r, LISTING_SETTLED_MS + 10));
      return shape(await listed(listings, dir));
    };
    await segment(dir, 0n, 100);
    await segment(dir, 10n, 50);
    assert.deepEqual(await settledListing(), ["0:100:sealed", "10:50:open"]);
    await appendFile(join(dir, `${segmentStem(10n)}.log`), new Uint8Array(25));
    assert.deepEqual(shape(await listed(listings, dir)), ["0:100:sealed", "10:75:open"]);
    await segment(dir, 20n, 5);
    assert.deepEqual(await settledListing(), ["0:100:sealed", "10:75:sealed", "20:5:open"]);
    await rm(join(dir, `${segmentStem(0n)}.log`));
    assert.deepEqual(await settledListing(), ["10:75:sealed", "20:5:open"]);
    // Each caller gets copies: what one read does with its listing is not the next one's.
    const a = await listed(listings, dir);
    a[0].logSize = -1;
    assert.equal((await listed(listings, dir))[0].logSize, 75);
    assert.deepEqual(
      await listed(listings, dir),
      await listSegments(dir, { now: systemClock.now(), quiescenceMs: 0 }),
    );
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a sealed segment changed in place is seen once the listing is older than LISTING_REUSE_MS", async () => {
  const tmp = await tempDir();
  try {
    const dir = tmp.path;
    const clock = new FakeClock(Date.now() + 1_000); // the directory's last change is settled
    const listings = new LocalListings(clock);
    await segment(dir, 0n, 100);
    await segment(dir, 10n, 50);
    await listed(listings, dir);
    await truncate(join(dir, `${segmentStem(0n)}.log`), 40); // the directory itself is unchanged
    clock.advance(LISTING_REUSE_MS - 1);
    assert.equal((await listed(listings, dir))[0].logSize, 100, "reused within the window");
    clock.advance(1);
    assert.equal((await listed(listings, dir))[0].logSize, 40);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("quiescence is judged at each call, not when the listing was taken", async () => {
  const tmp = await tempDir();
  try {
    const dir = tmp.path;
    await segment(dir, 0n, 100);
    await segment(dir, 10n, 50);
    const quiet = 500;
    const files = [".log", ".index"].map((ext) => join(dir, segmentStem(0n) + ext));
    const mtime = Math.max(...await Promise.all(files.map(async (f) => (await stat(f)).mtimeMs)));
    const clock = new FakeClock(mtime);
    const listings = new LocalListings(clock);
    const first = await listings.list(dir, await stat(dir), quiet);
    assert.equal(first[0].sealed, false, "written just now");
    clock.advance(quiet);
    assert.equal((await listings.list(dir, await stat(dir), quiet))[0].sealed, true);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("a listing taken just after the directory changed is not reused: a second change in the same mtime tick shows", async () => {
  const tmp = await tempDir();
  try {
    const dir = tmp.path;
    await segment(dir, 0n, 100);
    await segment(dir, 10n, 50);
    const before = await stat(dir);
    const clock = new FakeClock(before.mtimeMs + LISTING_SETTLED_MS); // within the tick's reach
    const listings = new LocalListings(clock);
    assert.deepEqual(shape(await listed(listings, dir)), ["0:100:sealed", "10:50:open"]);
    // The broker removes the segments and makes another within the kernel's timestamp tick:
    // the directory's mtime reads as it did.
    await rm(join(dir, `${segmentStem(0n)}.log`));
    await rm(join(dir, `${segmentStem(10n)}.log`));
    await segment(dir, 0n, 7);
    await utimes(dir, before.atime, before.mtime);
    assert.equal((await stat(dir)).mtimeMs, before.mtimeMs);
    assert.deepEqual(shape(await listed(listings, dir)), ["0:7:open"]);
    // Once settled, a listing is reused again (the same mtime, a later clock).
    clock.advance(1);
    await listed(listings, dir);
    await writeFile(join(dir, `${segmentStem(20n)}.log`), new Uint8Array(1));
    await utimes(dir, before.atime, before.mtime);
    assert.deepEqual(shape(await listed(listings, dir)), ["0:7:open"], "reused: it was settled");
  } finally {
    await tmp.cleanup();
  }
});
