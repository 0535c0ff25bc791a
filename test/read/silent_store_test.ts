// A store that stops answering (issue 11, item 4): reads of remote segments through the chunk
// cache and the S3 store over real HTTP, against a server that accepts connections and then
// says nothing — or sends half a body and goes quiet. The read answers within fetch_timeout,
// the single flight frees its slot within fetch_timeout (no 60 s transport default), and the
// first read after the store recovers succeeds.
import assert from "node:assert/strict";
import http from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { S3Store } from "../../providers/s3/store.ts";
import type { SimStore } from "../../providers/sim/store.ts";
import { ChunkCache } from "../../src/cache/chunk_cache.ts";
import { FetchTimeout, StoreUnavailable } from "../../src/read/errors.ts";
import { readRecords } from "../../src/read/read_records.ts";
import { storeFetch } from "../../src/store.ts";
import { buildScenario, expectedRead } from "./_scenario.ts";

const FETCH_TIMEOUT = 300;
/** What the test allows beyond fetch_timeout for scheduling on a busy machine. */
const SLACK = 1200;

type Mode = "answer" | "silent" | "half a body";

/** What goes quiet: every request, or only those for `.log` objects (the chunk cache's GETs). */
type Scope = "everything" | ".log objects";

/**
 * An S3-ish server over the objects of a SimStore (GET and HEAD of `/{bucket}/{key}`, whole
 * objects; the client cuts ranges out of a 200), which can go silent.
 */
async function fakeS3(sim: SimStore, scope: Scope) {
  let mode: Mode = "answer";
  let requests = 0;
  const sockets = new Set<Socket>();
  /** Connections holding a request the server never answered (silent, or half a body). */
  const held = new Set<Socket>();
  const server = http.createServer((req, res) => {
    requests++;
    const key = decodeURIComponent(new URL(req.url ?? "/", "http://s3").pathname)
      .split("/").slice(2).join("/");
    const object = sim.objects.get(key);
    const quiet = scope === "everything" || key.endsWith(".log") ? mode : "answer";
    if (quiet === "silent") {
      held.add(req.socket); // accepted, read, never answered
      return;
    }
    if (!object) {
      res.writeHead(404, { "content-type": "application/xml" });
      res.end("<Error><Code>NoSuchKey</Code></Error>");
      return;
    }
    const headers = { "content-length": String(object.bytes.length), etag: `"${object.etag}"` };
    res.writeHead(200, headers);
    if (req.method === "HEAD") return void res.end();
    if (quiet === "half a body") {
      res.write(object.bytes.subarray(0, Math.floor(object.bytes.length / 2)));
      held.add(req.socket);
      return; // and never the rest
    }
    res.end(object.bytes);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    set mode(m: Mode) {
      mode = m;
      // A store that heals (restarts, or its balancer moves on) drops the connections it left
      // hanging; a request sent on one of them would wait behind the unanswered one.
      if (m === "answer") {
        for (const s of held) s.destroy();
        held.clear();
      }
    },
    get requests() {
      return requests;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const CASES: ReadonlyArray<[Exclude<Mode, "answer">, Scope]> = [
  ["silent", "everything"], // the .index GET of the read path itself
  ["silent", ".log objects"], // the chunk cache's single flights
  ["half a body", ".log objects"],
];

for (const [mode, scope] of CASES) {
  Deno.test(`a store that goes quiet (${mode}, ${scope}) frees reads and fetch slots within fetch_timeout; the first read after it heals succeeds`, async () => {
    const s = await buildScenario({
      format: "iggy-0.9",
      before: 80,
      after: 0,
      segmentSize: 4096,
      payloadSize: 64,
      evict: 100,
    });
    const server = await fakeS3(s.store, scope);
    const s3 = new S3Store({
      endpoint: server.endpoint,
      region: "us-east-1",
      bucket: "b",
      credentials: { accessKeyId: "AKID", secretAccessKey: "secret" },
      urlStyle: "path",
      fetch: storeFetch(FETCH_TIMEOUT), // what openStore gives every HTTP store
    });
    const cache = await ChunkCache.open(s3, {
      path: join(s.dir, "cache"),
      chunkSize: 2048,
      size: 1 << 30,
      sizePercent: 100,
      diskTotalBytes: 2 ** 40,
      persistInterval: Infinity,
      fetchTimeout: FETCH_TIMEOUT,
    });
    const ctx = s.context({ store: s3, reader: cache, fetchTimeoutMs: FETCH_TIMEOUT });
    const read = () => readRecords(ctx, { partition: s.ids, offset: 0n, maxBytes: 1 << 20 });
    try {
      server.mode = mode;
      const started = performance.now();
      await assert.rejects(read(), (err: unknown) => {
        assert.ok(err instanceof FetchTimeout || err instanceof StoreUnavailable, String(err));
        return true;
      });
      const answered = performance.now() - started;
      assert.ok(answered < FETCH_TIMEOUT + SLACK, `the read answered after ${answered} ms`);
      assert.ok(server.requests > 0);

      // The chunk fetches it started give up on the silent store on their own, without a
      // retry nobody waits for: no flight holds a slot past fetch_timeout.
      await cache.idle();
      const freed = performance.now() - started;
      assert.ok(freed < FETCH_TIMEOUT + SLACK, `the flights ended after ${freed} ms`);
      if (scope === ".log objects") {
        assert.ok(cache.stats().fetches.error >= 1, "the chunk fetches failed as store errors");
      }

      // Still silent: the next read is not stuck behind the last one's fetches either.
      const again = performance.now();
      await assert.rejects(read());
      assert.ok(performance.now() - again < FETCH_TIMEOUT + SLACK);
      await cache.idle();

      server.mode = "answer";
      const r = await read();
      assert.deepEqual(r.bytes, expectedRead(s.records, { offset: 0n }, 1 << 20)!.bytes);
    } finally {
      await cache.close();
      await s3.close?.();
      await server.close();
      await s.cleanup();
    }
  });
}
