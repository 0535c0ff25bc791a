// The read memory budget: reservations never exceed it, waiters are served in order as bytes
// come back, a wait that runs out is a typed 503-worthy error, and nothing leaks.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AnswerHold,
  COLLECTOR_HEADROOM,
  READ_BUDGET_WAIT_MS,
  ReadBudget,
  readBudgetBytes,
  ReadBudgetExceeded,
} from "../../src/read/read_budget.ts";
import { FakeClock } from "../_fake_clock.ts";

Deno.test("read budget: in order, never over, a wait that runs out fails typed", async () => {
  const clock = new FakeClock();
  const b = new ReadBudget(100, { clock });
  const r1 = await b.acquire(60, 1000);
  const order: string[] = [];
  const second = b.acquire(50, 1000).then((r) => (order.push("second"), r));
  const third = b.acquire(10, 1000).then((r) => (order.push("third"), r));
  await Promise.resolve();
  assert.equal(b.free, 40, "the small one does not overtake the one before it");
  r1();
  const r2 = await second;
  const r3 = await third;
  assert.deepEqual(order, ["second", "third"]);
  assert.equal(b.free, 40);
  // More than the budget: takes it all, once everything else is back.
  const big = b.acquire(1_000, 5000);
  r2();
  r3();
  const rb = await big;
  assert.equal(b.free, 0);
  const late = b.acquire(1, 2000);
  clock.advance(2000);
  await assert.rejects(late, (e) => e instanceof ReadBudgetExceeded && e.retryAfterSeconds === 1);
  rb();
  rb(); // a second release changes nothing
  assert.equal(b.free, 100);
});

Deno.test("read budget: random acquire/release never holds more than the budget (property)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 150 }), { minLength: 1, maxLength: 30 }),
      async (sizes) => {
        const b = new ReadBudget(100);
        let held = 0;
        let peak = 0;
        await Promise.all(sizes.map(async (n) => {
          const release = await b.acquire(n, 10_000);
          const got = Math.min(n, 100);
          held += got;
          peak = Math.max(peak, held);
          await new Promise((r) => setTimeout(r, 0));
          held -= got;
          release();
        }));
        assert.ok(peak <= 100, `held ${peak}`);
        assert.equal(b.free, 100);
      },
    ),
    { numRuns: 100 },
  );
});

Deno.test("read budget default: a sixteenth of the cache, between 64 MiB and 512 MiB", () => {
  const MiB = 1024 * 1024;
  assert.equal(readBudgetBytes(0, 4096 * MiB), 256 * MiB);
  assert.equal(readBudgetBytes(0, 100 * MiB), 64 * MiB);
  assert.equal(readBudgetBytes(0, Infinity), 512 * MiB);
  assert.equal(readBudgetBytes(10 * MiB, 4096 * MiB), 10 * MiB, "a configured value wins");
});

Deno.test("an answer's hold: its peak taken ahead, what goes beyond from the budget, all back at once, every byte counted with the collector's headroom", async () => {
  const given: number[] = [];
  const b = new ReadBudget(1000, { onReleased: (n) => given.push(n) });
  const hold = new AnswerHold(b);
  await hold.prepay(100);
  assert.equal(b.free, 1000 - 100 * COLLECTOR_HEADROOM, "the expected peak, reserved whole");
  await hold.hold(60);
  await hold.hold(40);
  assert.equal(b.free, 1000 - 100 * COLLECTOR_HEADROOM, "drawn from what was reserved ahead");
  await hold.hold(50);
  assert.equal(b.free, 1000 - 150 * COLLECTOR_HEADROOM, "beyond it, from the budget");
  await hold.hold(0);
  await hold.hold(-5);
  assert.equal(b.free, 1000 - 150 * COLLECTOR_HEADROOM, "nothing for nothing");
  hold.release();
  assert.equal(b.free, 1000);
  assert.deepEqual(given.toSorted((x, y) => x - y), [50, 100].map((n) => n * COLLECTOR_HEADROOM));
  hold.release();
  assert.equal(b.free, 1000, "a second release gives nothing twice");
});

Deno.test("answers' holds never take more than the budget, and give it all back, whether served or refused (property)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          ahead: fc.integer({ min: 0, max: 80 }),
          holds: fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 5 }),
        }),
        { minLength: 1, maxLength: 12 },
      ),
      async (answers) => {
        const clock = new FakeClock();
        const b = new ReadBudget(400, { clock });
        let lowest = b.free;
        const all = Promise.allSettled(answers.map(async (a) => {
          const hold = new AnswerHold(b);
          try {
            await hold.prepay(a.ahead);
            for (const n of a.holds) {
              await hold.hold(n);
              lowest = Math.min(lowest, b.free);
              await new Promise((r) => setTimeout(r, 0));
            }
          } finally {
            hold.release();
          }
        }));
        let settled = false;
        all.then(() => settled = true);
        // Answers that each hold a part and wait for more run out of time: 503, all given back.
        while (!settled) {
          await new Promise((r) => setTimeout(r, 0));
          clock.advance(READ_BUDGET_WAIT_MS);
        }
        for (const r of await all) {
          if (r.status === "rejected") assert.ok(r.reason instanceof ReadBudgetExceeded);
        }
        assert.ok(lowest >= 0, `free went to ${lowest}`);
        assert.equal(b.free, 400);
      },
    ),
    { numRuns: 100 },
  );
});
