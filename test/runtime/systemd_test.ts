// sd_notify: the socket address bytes, the watchdog interval, and messages reaching a fake
// NOTIFY_SOCKET from this process through libc (Deno's FFI), from Bun (bun:ffi, as in the
// compiled binary), and through the systemd-notify fallback.
import assert from "node:assert/strict";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { openNotifier, sockaddrUn, watchdogInterval } from "../../src/runtime/systemd.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";
import { startNotifyReceiver } from "./_notify_receiver.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("sockaddr_un for a path and for an abstract name", () => {
  assert.deepEqual([...sockaddrUn("/run/n")], [1, 0, 47, 114, 117, 110, 47, 110, 0]);
  assert.deepEqual([...sockaddrUn("@sd")], [1, 0, 0, 115, 100]);
  assert.throws(() => sockaddrUn("relative/path"), /not an absolute path/);
  assert.throws(() => sockaddrUn("vsock:2:1234"), /not an absolute path/);
  assert.throws(() => sockaddrUn("/" + "x".repeat(120)), /longer than sun_path/);
});

Deno.test("the watchdog pings at half of WATCHDOG_USEC, only for its own pid", () => {
  assert.equal(watchdogInterval({ WATCHDOG_USEC: "60000000" }, 7), 30_000);
  assert.equal(watchdogInterval({ WATCHDOG_USEC: "60000000", WATCHDOG_PID: "7" }, 7), 30_000);
  assert.equal(watchdogInterval({ WATCHDOG_USEC: "60000000", WATCHDOG_PID: "8" }, 7), undefined);
  assert.equal(watchdogInterval({}, 7), undefined);
  assert.equal(watchdogInterval({ WATCHDOG_USEC: "junk" }, 7), undefined);
});

Deno.test("no NOTIFY_SOCKET, no notifier", async () => {
  assert.equal(await openNotifier({ env: {} }), undefined);
});

Deno.test("READY, STATUS, WATCHDOG and STOPPING reach NOTIFY_SOCKET through libc", async () => {
  const rx = await startNotifyReceiver();
  const clock = new FakeClock();
  try {
    const n = (await openNotifier({
      env: { NOTIFY_SOCKET: rx.socket, WATCHDOG_USEC: "2000000" },
      clock,
    }))!;
    assert.equal(n.transport.kind, "ffi");
    assert.equal(n.watchdogMs, 1000);
    assert.equal(await n.ready("ready: 3 partitions"), true);
    await rx.waitFor((m) => m === "READY=1\nSTATUS=ready: 3 partitions\n", 10_000);
    n.startWatchdog();
    clock.advance(1000);
    clock.advance(1000);
    await rx.waitFor((m) => m === "WATCHDOG=1\n", 10_000);
    await n.stopping();
    await rx.waitFor((m) => m.startsWith("STOPPING=1\n"), 10_000);
    const pings = rx.messages.filter((m) => m === "WATCHDOG=1\n").length;
    assert.ok(pings >= 2, `${pings} watchdog pings`);
    n.close();
  } finally {
    await rx.stop();
  }
});

Deno.test("from Bun (the compiled binary's runtime) through bun:ffi", async () => {
  const rx = await startNotifyReceiver();
  const tmp = await tempDir("tierd-bun-notify");
  try {
    const script = join(tmp.path, "notify.ts");
    await writeFile(
      script,
      `import { openNotifier } from ${JSON.stringify(join(ROOT, "src/runtime/systemd.ts"))};\n` +
        `const n = await openNotifier();\n` +
        `if (!n) throw new Error("no notifier");\n` +
        `console.log(n.transport.kind, await n.ready("from bun"));\n` +
        `n.close();\n`,
    );
    const out = await new Deno.Command("npx", {
      args: ["-y", "bun@1", "run", script],
      cwd: ROOT,
      env: { NOTIFY_SOCKET: rx.socket },
      stdin: "null",
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.equal(stdout.trim(), "ffi true");
    await rx.waitFor((m) => m === "READY=1\nSTATUS=from bun\n", 10_000);
  } finally {
    await tmp.cleanup();
    await rx.stop();
  }
});

Deno.test("without libc, systemd-notify is run with the message as arguments", async () => {
  const tmp = await tempDir("tierd-sd-notify");
  try {
    const fake = join(tmp.path, "systemd-notify");
    const log = join(tmp.path, "args");
    await writeFile(fake, `#!/bin/sh\necho "$NOTIFY_SOCKET $*" >> ${log}\n`);
    await chmod(fake, 0o755);
    const n = (await openNotifier({
      env: { NOTIFY_SOCKET: "@tierd-test" },
      transport: "systemd-notify",
      systemdNotify: fake,
    }))!;
    assert.equal(n.transport.kind, "systemd-notify");
    assert.equal(await n.ready("fallback"), true);
    assert.equal(await readFile(log, "utf8"), "@tierd-test READY=1 STATUS=fallback\n");
    const missing = (await openNotifier({
      env: { NOTIFY_SOCKET: "@tierd-test" },
      transport: "systemd-notify",
      systemdNotify: join(tmp.path, "nowhere"),
    }))!;
    assert.equal(await missing.ready("x"), false);
  } finally {
    await tmp.cleanup();
  }
});
