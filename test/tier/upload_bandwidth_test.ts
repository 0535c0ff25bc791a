// upload_bandwidth is live: the bucket's rate follows the config as a SIGHUP leaves it, from the
// next body sent; "unlimited" (Infinity) lets everything go at once.
import assert from "node:assert/strict";
import { LiveBandwidth } from "../../src/tier/upload_bandwidth.ts";
import { FakeClock } from "../_fake_clock.ts";

const KiB = 1024;

Deno.test("upload bandwidth follows the configured rate from the next body", async () => {
  const clock = new FakeClock();
  const config = { rate: Infinity };
  const pace = new LiveBandwidth(() => config.rate, { clock });
  await pace.take(10_000 * KiB);
  assert.equal(clock.now(), new FakeClock().now(), "unlimited: no wait");
  config.rate = 100 * KiB; // a reload sets 100 KiB/s
  const t0 = clock.now();
  await clock.runUntil(pace.take(64 * KiB));
  await clock.runUntil(pace.take(200 * KiB));
  assert.equal(pace.rate, 100 * KiB);
  const took = clock.now() - t0;
  assert.ok(took >= 2_000 - 1 && took < 2_100, `${took} ms`);
  config.rate = Infinity; // and back
  const t1 = clock.now();
  await pace.take(10_000 * KiB);
  assert.equal(clock.now(), t1);
});
