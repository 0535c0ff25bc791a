// Copy progress: copies counted per partition and in all, the rate over the last minute (or
// since start), failed copies not counted, and the inner observer still told.
import assert from "node:assert/strict";
import { CopyProgress, RATE_WINDOW_MS } from "../../src/runtime/progress.ts";
import { FakeClock } from "../_fake_clock.ts";

Deno.test("copy rate over the last minute, per partition and in all", () => {
  const clock = new FakeClock();
  const progress = new CopyProgress(clock);
  const seen: string[] = [];
  const observer = progress.observer({ upload: (o, _s, _b, p) => void seen.push(`${o} ${p}`) });
  clock.advance(10_000);
  observer.upload!("ok", 1, 1000, "0/0/0");
  observer.upload!("adopted", 1, 500, "0/0/1");
  observer.upload!("failed", 1, 0, "0/0/1");
  assert.deepEqual(seen, ["ok 0/0/0", "adopted 0/0/1", "failed 0/0/1"]);
  // 10 s since start: the window is 10 s long.
  assert.deepEqual(progress.rate("0/0/0"), {
    segments: 1,
    bytes: 1000,
    bytesPerSecond: 100,
    segmentsPerSecond: 0.1,
  });
  assert.equal(progress.rate().bytesPerSecond, 150);
  assert.equal(progress.rate().segments, 2);
  clock.advance(RATE_WINDOW_MS);
  // Out of the window: no rate, the totals stay.
  assert.deepEqual(progress.rate(), {
    segments: 2,
    bytes: 1500,
    bytesPerSecond: 0,
    segmentsPerSecond: 0,
  });
  observer.upload!("ok", 1, 6000, "0/0/0");
  assert.equal(progress.rate("0/0/0").bytesPerSecond, 100); // 6000 B over a full minute
  assert.equal(progress.rate("9/9/9").segments, 0);
});
