// Progress lines: N of M, bytes, rate and ETA; rewritten in place on a terminal (at most every
// 100 ms, and always the last step), one line per step otherwise.
import assert from "node:assert/strict";
import { formatDuration, Progress, writeAboveProgress } from "../../src/cli/progress.ts";
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
  assert.equal(formatDuration(9 * 86400 + 5 * 3600 + 59), "9 d 5 h");
});

Deno.test("a big item moves the terminal line while it is under way; a plain log prints no partials", () => {
  const clock = new FakeClock();
  const tty: string[] = [];
  const plain: string[] = [];
  const onTty = new Progress("run --once: copy", {
    clock,
    tty: true,
    unit: "segments",
    write: (t) => void tty.push(t),
  });
  const onLog = new Progress("run --once: copy", {
    clock,
    tty: false,
    unit: "segments",
    write: (t) => void plain.push(t),
  });
  for (const p of [onTty, onLog]) {
    for (let stored = 8; stored <= 64; stored += 8) {
      clock.advance(200);
      p.update({ done: 0, total: 1, bytesDone: stored * MiB, bytesTotal: 64 * MiB }, undefined, {
        partial: true,
      });
    }
  }
  assert.equal(plain.length, 0, plain.join(""));
  assert.equal(tty.length, 8, "every part of the 64 MiB segment moved the line");
  assert.match(tty.at(-1)!, /0\/1 segments, 64.0 MiB of 64.0 MiB/);
  assert.ok(!tty.some((t) => t.includes("\n")), "a partial step never ends the line");
  onTty.update({ done: 1, total: 1, bytesDone: 64 * MiB, bytesTotal: 64 * MiB });
  assert.equal(tty.at(-1), "\n", "the last step ends it");
});

Deno.test("a log line written while a progress line is open goes above it, never onto it", () => {
  const clock = new FakeClock();
  const out: string[] = [];
  const p = new Progress("restore 0/0/0", { clock, tty: true, write: (t) => void out.push(t) });
  p.update({ done: 1, total: 3, bytesDone: MiB, bytesTotal: 3 * MiB });
  const line = out.at(-1)!;
  writeAboveProgress('{"level":"warn","msg":"a copy failed"}');
  assert.equal(out.at(-1), `\r\x1b[K{"level":"warn","msg":"a copy failed"}\n${line}`);
  p.end();
  assert.equal(out.at(-1), "\n");
});
