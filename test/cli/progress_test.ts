// Progress lines: N of M, bytes, rate and ETA; rewritten in place on a terminal (at most every
// 100 ms, and always the last step), one line per step otherwise.
import assert from "node:assert/strict";
import { formatDuration, Progress } from "../../src/cli/progress.ts";
import { FakeClock } from "../_fake_clock.ts";

const MiB = 1024 * 1024;

Deno.test("a plain line per step, with the item, bytes of total, rate and ETA", () => {
  const clock = new FakeClock();
  const out: string[] = [];
  const p = new Progress("restore 0/0/0", {
    clock,
    tty: false,
    unit: "segments",
    write: (t) => void out.push(t),
  });
  clock.advance(1000);
  p.update({ done: 1, total: 4, bytesDone: 2 * MiB, bytesTotal: 8 * MiB }, "segment 1");
  clock.advance(1000);
  p.update({ done: 4, total: 4, bytesDone: 8 * MiB, bytesTotal: 8 * MiB }, "segment 4");
  p.end();
  assert.deepEqual(out, [
    "restore 0/0/0: 1/4 segments, 2.0 MiB of 8.0 MiB, 2.0 MiB/s eta 3 s: segment 1\n",
    "restore 0/0/0: 4/4 segments, 8.0 MiB of 8.0 MiB, 4.0 MiB/s: segment 4\n",
  ]);
});

Deno.test("without a byte total the ETA follows the items' rate", () => {
  const clock = new FakeClock();
  const p = new Progress("gen 1/2/0", { clock, tty: false, unit: "messages", write: () => {} });
  clock.advance(2000);
  assert.equal(
    p.line({ done: 1000, total: 5000, bytesDone: MiB }),
    "gen 1/2/0: 1000/5000 messages, 1.0 MiB, 512 KiB/s eta 8 s",
  );
});

Deno.test("on a terminal one line is rewritten, throttled, and ended once", () => {
  const clock = new FakeClock();
  let text = "";
  const p = new Progress("run --once: copy", { clock, tty: true, write: (t) => void (text += t) });
  p.update({ done: 1, total: 3, bytesDone: 1, bytesTotal: 3 });
  clock.advance(10);
  p.update({ done: 2, total: 3, bytesDone: 2, bytesTotal: 3 }); // within 100 ms: not drawn
  assert.equal(text.split("\r").length - 1, 1);
  clock.advance(200);
  p.update({ done: 3, total: 3, bytesDone: 3, bytesTotal: 3 }); // the last step always draws
  assert.equal(text.split("\r").length - 1, 2);
  assert.ok(text.endsWith("\x1b[K\n"), JSON.stringify(text));
  p.end(); // already ended
  assert.equal(text.split("\n").length - 1, 1);

  // Work that stops short of its total: end() closes the line.
  let short = "";
  const q = new Progress("x", { clock, tty: true, write: (t) => void (short += t) });
  q.update({ done: 1, total: 5, bytesDone: 0, bytesTotal: 0 });
  q.end();
  assert.ok(short.endsWith("\n"));
});

Deno.test("formatDuration", () => {
  assert.equal(formatDuration(4.4), "4 s");
  assert.equal(formatDuration(125), "2 m 5 s");
  assert.equal(formatDuration(3 * 3600 + 120), "3 h 2 m");
});
