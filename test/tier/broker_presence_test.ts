// Seeing a running broker beside the data directory: another process holding a file under it
// open for writing (found in /proc; readers do not count), or its HTTP API answering `pong` at
// the address its runtime config names (Iggy's default only without a process table to scan);
// answers are kept briefly, a "running" one longer than a "stopped" one. Real Iggy servers are
// tried in test/e2e/iggy_neighbour_test.ts.
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  BrokerPresence,
  IGGY_DEFAULT_HTTP,
  presenceChecks,
  scanOpenFiles,
} from "../../src/tier/broker_presence.ts";
import { FakeClock } from "../_fake_clock.ts";
import { tempDir } from "../_util.ts";
import { holdOpen, release } from "./_holder.ts";

const onLinux = await Deno.stat("/proc/self/fd").then(() => true, () => false);

/** A data dir with one segment file. */
async function dataDir(root: string): Promise<{ dir: string; log: string }> {
  const dir = join(root, "local_data");
  const part = join(dir, "streams/0/topics/0/partitions/0");
  await mkdir(part, { recursive: true });
  const log = join(part, "00000000000000000000.log");
  await writeFile(log, "records");
  return { dir, log };
}

/** A fetch that answers nothing (no broker API anywhere). */
const refused = () => Promise.reject(new TypeError("connection refused"));

Deno.test({
  name: "presence: a process holding a file under the data dir open is seen, with its pid and name",
  ignore: !onLinux,
  fn: async () => {
    const tmp = await tempDir("tierd-presence");
    const { dir, log } = await dataDir(tmp.path);
    try {
      // This process never counts, whatever it holds open.
      const own = await Deno.open(log);
      try {
        const before = await scanOpenFiles(dir);
        assert.equal(before.holder, undefined);
        assert.equal(before.scanned, true);
      } finally {
        own.close();
      }
      // A reader (a backup agent, du, tail) is not a broker.
      const reader = await holdOpen(log, "read");
      try {
        const read = await scanOpenFiles(dir);
        assert.equal(read.holder, undefined);
        assert.ok(read.readers >= 1);
        const presence = new BrokerPresence({ dataDir: dir, fetch: refused });
        const seen = await presence.check();
        assert.equal(seen.running, false);
        assert.match(seen.evidence, /open read-only: readers, not a broker/);
      } finally {
        await release(reader);
      }
      const holder = await holdOpen(log);
      try {
        const seen = await scanOpenFiles(dir);
        assert.equal(
          seen.holder,
          `process ${holder.pid} (sleep) holds streams/0/topics/0/partitions/0/` +
            "00000000000000000000.log open for writing",
        );
        const presence = new BrokerPresence({ dataDir: dir, fetch: refused });
        assert.deepEqual(await presence.check(), { running: true, evidence: seen.holder });
      } finally {
        await release(holder);
      }
      const presence = new BrokerPresence({ dataDir: dir, fetch: refused });
      const after = await presence.check();
      assert.equal(after.running, false);
      assert.match(after.evidence, /no broker has run here \(no runtime\/current_config\.toml\)/);
    } finally {
      await tmp.cleanup();
    }
  },
});

Deno.test("presence: without a process table the scan is skipped, and says so", async () => {
  const tmp = await tempDir("tierd-presence");
  const { dir } = await dataDir(tmp.path);
  try {
    assert.deepEqual(await scanOpenFiles(dir, join(tmp.path, "no-proc")), {
      unreadable: 0,
      scanned: false,
      readers: 0,
    });
    const presence = new BrokerPresence({
      dataDir: dir,
      fetch: refused,
      procRoot: join(tmp.path, "no-proc"),
    });
    const seen = await presence.check();
    assert.equal(seen.running, false);
    assert.match(seen.evidence, /no .*no-proc to scan/);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("presence: the broker's HTTP API is asked where its runtime config says; without one, files held open for writing", async () => {
  const tmp = await tempDir("tierd-presence");
  const { dir } = await dataDir(tmp.path);
  try {
    const unconfigured = `files held open for writing (http://${IGGY_DEFAULT_HTTP}/ping where ` +
      "there is no process table to scan)";
    assert.equal(await presenceChecks(dir), unconfigured);
    await mkdir(join(dir, "runtime"));
    const config = join(dir, "runtime", "current_config.toml");
    await writeFile(
      config,
      '[tcp]\naddress = "127.0.0.1:8090"\n\n[http]\nenabled = true\naddress = "127.0.0.1:38827"\n',
    );
    assert.equal(
      await presenceChecks(dir),
      "http://127.0.0.1:38827/ping and files held open for writing",
    );
    await writeFile(config, '[http]\naddress = "0.0.0.0:3001"\n');
    assert.equal(
      await presenceChecks(dir),
      "http://127.0.0.1:3001/ping and files held open for writing",
      "a wildcard is asked on loopback",
    );
    await writeFile(config, "not = [toml");
    assert.equal(await presenceChecks(dir), unconfigured);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("presence: an HTTP API answering pong shows the broker running; anything else does not", async () => {
  const tmp = await tempDir("tierd-presence");
  const { dir } = await dataDir(tmp.path);
  let answer = "pong";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    return new URL(req.url).pathname === "/ping"
      ? new Response(answer)
      : new Response("no", { status: 404 });
  });
  try {
    await mkdir(join(dir, "runtime"));
    const url = `http://127.0.0.1:${server.addr.port}`;
    await writeFile(
      join(dir, "runtime", "current_config.toml"),
      `[http]\naddress = "127.0.0.1:${server.addr.port}"\n`,
    );
    const none = join(tmp.path, "no-proc");
    const running = await new BrokerPresence({ dataDir: dir, procRoot: none }).check();
    assert.deepEqual(running, { running: true, evidence: `its HTTP API answers at ${url}` });
    answer = "hello from something else";
    const other = await new BrokerPresence({ dataDir: dir, procRoot: none }).check();
    assert.equal(other.running, false);
  } finally {
    await server.shutdown();
    await tmp.cleanup();
  }
});

Deno.test("presence: a running answer is kept 5 s, a stopped one 1 s; concurrent checks share one look", async () => {
  const tmp = await tempDir("tierd-presence");
  const { dir } = await dataDir(tmp.path);
  const clock = new FakeClock();
  let pings = 0;
  let up = true;
  const fetchFn = () => {
    pings++;
    return Promise.resolve(up ? new Response("pong") : new Response("", { status: 503 }));
  };
  const presence = new BrokerPresence({
    dataDir: dir,
    clock,
    fetch: fetchFn,
    procRoot: join(tmp.path, "no-proc"),
  });
  try {
    const [a, b] = await Promise.all([presence.check(), presence.check()]);
    assert.equal(a.running && b.running, true);
    assert.equal(pings, 1, "one look for both");
    up = false;
    clock.advance(4_999);
    assert.equal((await presence.check()).running, true, "still the kept answer");
    assert.equal(pings, 1);
    clock.advance(1);
    assert.equal((await presence.check()).running, false);
    assert.equal(pings, 2);
    up = true;
    clock.advance(999);
    assert.equal((await presence.check()).running, false, "a stopped answer is kept 1 s");
    clock.advance(1);
    assert.equal((await presence.check()).running, true);
    assert.equal(pings, 3);
    presence.forget();
    await presence.check();
    assert.equal(pings, 4, "forget() looks again");
  } finally {
    await tmp.cleanup();
  }
});

Deno.test({
  name:
    "presence: without a runtime config, a broker answering on Iggy's default port is not this directory's",
  ignore: !onLinux,
  fn: async () => {
    const tmp = await tempDir("tierd-presence");
    const { dir } = await dataDir(tmp.path);
    try {
      let asked = 0;
      const pong = () => {
        asked++;
        return Promise.resolve(new Response("pong"));
      };
      // Another Iggy on this host answers 127.0.0.1:3000; none has run on this directory.
      const seen = await new BrokerPresence({ dataDir: dir, fetch: pong }).check();
      assert.equal(seen.running, false, seen.evidence);
      assert.equal(asked, 0, "the default address is not asked where /proc can be scanned");
      // Without a process table, the default address is the only sign left: it counts.
      const blind = await new BrokerPresence({
        dataDir: dir,
        fetch: pong,
        procRoot: join(tmp.path, "no-proc"),
      }).check();
      assert.deepEqual(blind, {
        running: true,
        evidence: `an Iggy HTTP API answers at http://${IGGY_DEFAULT_HTTP}`,
      });
    } finally {
      await tmp.cleanup();
    }
  },
});
