// process_* metrics: read from a fake /proc (fields after the command name, which may hold
// spaces and parentheses), left out where there is no /proc, and from the real /proc on Linux.
import assert from "node:assert/strict";
import {
  registerHeapMetrics,
  registerProcessMetrics,
  sampleProcess,
} from "../../src/metrics/process.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { parseExposition } from "./_exposition.ts";

const STAT = "4242 (tierd (x) y) S 1 4242 4242 0 -1 4194560 3000 0 0 0 " +
  "250 150 0 0 20 0 9 0 12345 987654321 2048 18446744073709551615";

const fake = {
  read: (path: string) =>
    ({
      "/proc/self/stat": STAT,
      "/proc/stat": "cpu  1 2 3\nbtime 1750000000\nprocesses 5\n",
      "/proc/self/limits": "Limit  Soft Limit Hard Limit Units\n" +
        "Max open files            1024                 524288               files     \n",
    })[path],
  count: (path: string) => (path === "/proc/self/fd" ? 17 : undefined),
};

Deno.test("process figures come from /proc/self", () => {
  assert.deepEqual(sampleProcess(fake), {
    cpuSeconds: 4,
    virtualBytes: 987654321,
    residentBytes: 2048 * 4096,
    startTimeSeconds: 1750000000 + 123.45,
    openFds: 17,
    maxFds: 1024,
  });
});

Deno.test("process_* metrics render from the source, and not at all without /proc", () => {
  const r = new Registry();
  assert.equal(registerProcessMetrics(r, fake), true);
  const f = parseExposition(r.render());
  assert.equal(f.get("process_cpu_seconds_total")?.type, "counter");
  assert.equal(f.get("process_cpu_seconds_total")?.samples[0].value, 4);
  assert.equal(f.get("process_open_fds")?.samples[0].value, 17);
  assert.equal(f.get("process_max_fds")?.samples[0].value, 1024);
  assert.equal(f.get("process_resident_memory_bytes")?.samples[0].value, 2048 * 4096);
  const none = new Registry();
  assert.equal(
    registerProcessMetrics(none, { read: () => undefined, count: () => undefined }),
    false,
  );
  assert.equal(none.render(), "");
});

Deno.test({
  name: "process_* metrics from this machine's /proc",
  ignore: Deno.build.os !== "linux",
  fn() {
    const s = sampleProcess();
    assert.ok(s.cpuSeconds! > 0, "cpu seconds");
    assert.ok(s.residentBytes! > 1024 * 1024, "resident memory");
    assert.ok(s.openFds! >= 3, "open fds");
    const startedSecondsAgo = Date.now() / 1000 - s.startTimeSeconds!;
    assert.ok(
      startedSecondsAgo >= -5 && startedSecondsAgo < 3600,
      `started ${startedSecondsAgo} s ago`,
    );
  },
});

Deno.test("heap metrics: the runtime's heap in use and reserved, read at every render", async () => {
  const r = new Registry();
  let used = 10;
  registerHeapMetrics(r, () => ({ heapUsed: used, heapTotal: 64 }));
  assert.match(await r.render(), /^tierd_heap_used_bytes 10$/m);
  used = 20;
  const text = await r.render();
  assert.match(text, /^tierd_heap_used_bytes 20$/m);
  assert.match(text, /^tierd_heap_total_bytes 64$/m);
});
