// FetchWorkers against a real HTTP server, with real worker threads: a chunk-sized ranged GET is
// answered off the event loop byte for byte, with the deadlines and body checks of the in-thread
// transport; everything else stays in-thread; a caller's abort, a broken worker and an idle one
// end as they should. Under Bun (the binary's runtime) an idle worker never holds the process.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { CHUNK_BLOCK_SIZE, encodeChunkHeader } from "../../src/cache/chunk_format.ts";
import { initHashes, xxh3_64 } from "../../src/hash.ts";
import {
  bodyBlockSums,
  FetchWorkers,
  type FetchWorkersOptions,
  OFF_THREAD_MIN_BYTES,
  offThreadHeaders,
} from "../../providers/fetch_workers.ts";
import { storeFetch } from "../../src/store.ts";
import { sendHttp } from "../../providers/http.ts";
import { isRetryable, StoreError } from "../../providers/types.ts";
import { REPO_ROOT, tempDir } from "../_util.ts";

const MiB = 1024 * 1024;
const OBJECT = new Uint8Array(4 * MiB).map((_, i) => (i * 31 + (i >> 12)) & 0xff);
const DEADLINE_MS = 300;

/** A store stand-in: ranged GETs of OBJECT, and paths that misbehave. */
async function objectServer() {
  const arrived: string[] = [];
  const closed: string[] = [];
  const server = http.createServer((req, res) => {
    arrived.push(req.url ?? "");
    req.socket.once("close", () => closed.push(req.url ?? ""));
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers["range"] ?? "");
    const start = m ? Number(m[1]) : 0;
    const end = m ? Number(m[2]) + 1 : OBJECT.length;
    const body = OBJECT.subarray(start, end);
    const head = {
      "content-length": String(body.length),
      "content-range": `bytes ${start}-${end - 1}/${OBJECT.length}`,
    };
    switch (req.url) {
      case "/object":
        res.writeHead(206, head);
        res.end(body);
        return;
      case "/silent": // never answers
        return;
      case "/stalls": // half the body, then nothing
        res.writeHead(206, head);
        res.write(body.subarray(0, body.length >> 1));
        return;
      case "/short": // half the body, then the connection ends
        res.writeHead(206, head);
        res.write(body.subarray(0, body.length >> 1), () => res.destroy());
        return;
      default:
        res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    arrived,
    closed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One worker thread with both deadlines at `deadlineMs`, sending the rest through storeFetch. */
function openWorkers(deadlineMs: number, more: Partial<FetchWorkersOptions> = {}): FetchWorkers {
  return new FetchWorkers({
    firstByteMs: deadlineMs,
    stallMs: deadlineMs,
    inThread: storeFetch(deadlineMs),
    workers: 1,
    ...more,
  });
}

function ranged(start: number, length: number): Record<string, string> {
  return { range: `bytes=${start}-${start + length - 1}` };
}

async function get(
  workers: FetchWorkers,
  url: string,
  headers: Record<string, string>,
  signal?: AbortSignal,
) {
  return await sendHttp(workers.fetch, { method: "GET", url, headers, signal }, {
    op: "get",
    key: "k",
  });
}

function transportError(pattern: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof StoreError && err.kind === "Transport", String(err));
    assert.match(err.message, pattern);
    assert.ok(isRetryable(err), "a transport error is retried");
    return true;
  };
}

Deno.test("fetch workers: a chunk-sized ranged GET is answered by a worker, byte for byte, with its block checksums", async () => {
  const store = await objectServer();
  let inThread = 0;
  const base = storeFetch(5000);
  await initHashes();
  const workers = new FetchWorkers({
    firstByteMs: 5000,
    stallMs: 5000,
    inThread: (input, init) => (inThread++, base(input, init)),
    workers: 2,
    blockSize: CHUNK_BLOCK_SIZE,
  });
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: OBJECT.length - 1 }),
        fc.integer({ min: 1, max: OBJECT.length }),
        async (start, wanted) => {
          const length = Math.min(wanted, OBJECT.length - start);
          const before = workers.offThread;
          const got = await get(workers, store.url("/object"), ranged(start, length));
          assert.equal(got.status, 206);
          assert.deepEqual(got.body, OBJECT.subarray(start, start + length));
          assert.equal(
            got.headers.get("content-range"),
            `bytes ${start}-${start + length - 1}/${OBJECT.length}`,
          );
          const offThread = length >= OFF_THREAD_MIN_BYTES;
          assert.equal(workers.offThread - before, offThread ? 1 : 0, `${length} bytes`);
          // The worker took the chunk format's block checksums of what it read, exactly those.
          const sums = bodyBlockSums(got.body, CHUNK_BLOCK_SIZE);
          assert.equal(sums !== undefined, offThread);
          if (sums) {
            const want = Array.from(
              { length: Math.ceil(length / CHUNK_BLOCK_SIZE) },
              (_, b) =>
                xxh3_64(got.body.subarray(b * CHUNK_BLOCK_SIZE, (b + 1) * CHUNK_BLOCK_SIZE)),
            );
            assert.deepEqual([...sums], want);
            assert.deepEqual(
              encodeChunkHeader("0123456789abcdef", { start, end: start + length }, got.body),
              encodeChunkHeader(
                "0123456789abcdef",
                { start, end: start + length },
                got.body.slice(),
              ),
              "a chunk header from the worker's sums is the one the event loop would make",
            );
            assert.equal(bodyBlockSums(got.body.subarray(1), CHUNK_BLOCK_SIZE), undefined);
            assert.equal(bodyBlockSums(got.body, CHUNK_BLOCK_SIZE * 2), undefined);
          }
        },
      ),
      { numRuns: 40 },
    );
    assert.ok(inThread > 0 && workers.offThread > 0, "both ways were taken");
    assert.ok(workers.threads() <= 2, "never more threads than asked for");
  } finally {
    workers.close();
    await store.close();
  }
});

Deno.test("fetch workers: only large ranged GETs without a body are sent off the event loop", () => {
  fc.assert(
    fc.property(
      fc.constantFrom("GET", "PUT", "HEAD", "POST"),
      fc.constantFrom("range", "x-ms-range", "x-other"),
      fc.nat({ max: 1e9 }),
      fc.integer({ min: 1, max: 4 * MiB }),
      fc.boolean(),
      (method, name, start, length, withBody) => {
        const init: RequestInit = {
          method,
          headers: { [name]: `bytes=${start}-${start + length - 1}`, authorization: "x" },
          body: withBody ? new Uint8Array(1) : undefined,
        };
        const headers = offThreadHeaders(init, MiB);
        const wanted = method === "GET" && name !== "x-other" && !withBody && length >= MiB;
        assert.equal(headers !== undefined, wanted);
        if (headers) assert.deepEqual(headers, init.headers, "sent as signed");
      },
    ),
  );
  assert.equal(offThreadHeaders({ method: "GET", headers: new Headers() }, 1), undefined);
});

Deno.test("fetch workers: the first-byte and stall deadlines and the length check hold in the worker", async () => {
  const store = await objectServer();
  const workers = openWorkers(DEADLINE_MS);
  try {
    for (
      const [path, pattern] of [
        ["/silent", /the store went silent: no answer within 300 ms/],
        ["/stalls", /the store went silent: no byte of the body for 300 ms/],
        ["/short", /./],
      ] as const
    ) {
      const started = performance.now();
      await assert.rejects(
        get(workers, store.url(path), ranged(0, 2 * MiB)),
        transportError(pattern),
      );
      const took = performance.now() - started;
      if (path !== "/short") {
        assert.ok(took >= DEADLINE_MS - 20 && took < DEADLINE_MS + 1500, `${path}: ${took} ms`);
      }
    }
    assert.equal(workers.offThread, 0, "no failed request counted as answered");
    // The worker that kept those deadlines still answers.
    const got = await get(workers, store.url("/object"), ranged(MiB, 2 * MiB));
    assert.deepEqual(got.body, OBJECT.subarray(MiB, 3 * MiB));
  } finally {
    workers.close();
    await store.close();
  }
});

Deno.test("fetch workers: the caller's abort ends the request at once, and the worker drops it", async () => {
  const store = await objectServer();
  const workers = openWorkers(10_000);
  try {
    const controller = new AbortController();
    const pending = get(workers, store.url("/silent"), ranged(0, 2 * MiB), controller.signal);
    for (let i = 0; i < 500 && !store.arrived.includes("/silent"); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(store.arrived.includes("/silent"), "the worker sent the request");
    const reason = new Error("the reader went away");
    controller.abort(reason);
    await assert.rejects(pending, (err) => err === reason);
    for (let i = 0; i < 50 && !store.closed.includes("/silent"); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(store.closed.includes("/silent"), "the worker's request to the store was ended");
  } finally {
    workers.close();
    await store.close();
  }
});

Deno.test("fetch workers: a worker that breaks fails its requests as transport errors and is replaced; one that cannot start leaves the GETs in-thread", async () => {
  const store = await objectServer();
  const dir = await tempDir("tierd-broken-worker");
  const modules = {
    // Answers its first GET (four bytes), then throws.
    flaky: `let n = 0;
self.onmessage = (e) => {
  if (e.data.type !== "get") return;
  if (n++ > 0) throw new Error("boom");
  const body = new Uint8Array([1, 2, 3, 4]).buffer;
  self.postMessage({ type: "done", id: e.data.id, status: 206, statusText: "", headers: [["content-length", "4"]], body, offset: 0, length: 4, overlong: false }, [body]);
};
`,
    unloadable: `throw new Error("cannot load");\n`,
  };
  const broken: [string, boolean][] = [];
  const open = async (name: keyof typeof modules) => {
    const path = `${dir.path}/${name}.js`;
    await Deno.writeTextFile(path, modules[name]);
    return openWorkers(5000, {
      module: new URL(`file://${path}`).href,
      onBroken: (why, inThread) => void broken.push([why, inThread]),
    });
  };
  const flaky = await open("flaky");
  const unloadable = await open("unloadable");
  try {
    const url = store.url("/object");
    assert.deepEqual([...(await get(flaky, url, ranged(0, 2 * MiB))).body], [1, 2, 3, 4]);
    await assert.rejects(get(flaky, url, ranged(0, 2 * MiB)), transportError(/stopped: .*boom/));
    assert.equal(broken.length, 1);
    assert.match(broken[0][0], /boom/);
    assert.equal(broken[0][1], false, "it had answered: a new worker takes the next");
    assert.equal(flaky.threads(), 0, "the broken worker is gone");
    assert.deepEqual(
      [...(await get(flaky, url, ranged(0, 2 * MiB))).body],
      [1, 2, 3, 4],
      "replaced",
    );
    assert.equal(flaky.offThread, 2);

    await assert.rejects(get(unloadable, url, ranged(0, 2 * MiB)), transportError(/cannot load/));
    assert.equal(broken.length, 2);
    assert.match(broken[1][0], /cannot load/);
    assert.equal(broken[1][1], true, "it never answered: in-thread from now on");
    const got = await get(unloadable, url, ranged(MiB, 2 * MiB));
    assert.deepEqual(got.body, OBJECT.subarray(MiB, 3 * MiB), "in-thread from then on");
    assert.equal(unloadable.offThread, 0);
    assert.equal(unloadable.threads(), 0);
  } finally {
    flaky.close();
    unloadable.close();
    await dir.cleanup();
    await store.close();
  }
});

Deno.test("fetch workers: an idle worker stops, and a new one starts when needed", async () => {
  const store = await objectServer();
  const idle = openWorkers(5000, { idleMs: 50 });
  try {
    await get(idle, store.url("/object"), ranged(0, 2 * MiB));
    assert.equal(idle.threads(), 1);
    for (let i = 0; i < 50 && idle.threads() > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(idle.threads(), 0, "an idle worker stops");
    const again = await get(idle, store.url("/object"), ranged(MiB, MiB));
    assert.deepEqual(again.body, OBJECT.subarray(MiB, 2 * MiB));
    assert.equal(idle.offThread, 2);
  } finally {
    idle.close();
    await store.close();
  }
});

Deno.test("fetch workers under Bun: a request in flight keeps the process alive, an idle worker does not", async () => {
  const dir = await tempDir("tierd-bun-workers");
  try {
    // No close(): the script's process must end by itself once the answer is in (a worker
    // that held it would run into the kill below).
    const script = `${dir.path}/script.ts`;
    await Deno.writeTextFile(
      script,
      `
import http from "node:http";
import { bodyBlockSums, FetchWorkers } from "${REPO_ROOT}providers/fetch_workers.ts";
import { storeFetch } from "${REPO_ROOT}src/store.ts";
import { xxh3_64 } from "${REPO_ROOT}src/hash.ts";
import { sendHttp } from "${REPO_ROOT}providers/http.ts";
const body = new Uint8Array(2 * 1024 * 1024).map((_, i) => (i * 7 + (i >> 9)) & 255);
const server = http.createServer((req, res) => {
  // The answer comes late: only the request in flight keeps the process running meanwhile.
  setTimeout(() => { res.writeHead(206, { "content-length": String(body.length) }); res.end(body); server.close(); }, 300);
});
server.listen(0, "127.0.0.1", () => {
  server.unref();
  const workers = new FetchWorkers({ firstByteMs: 5000, stallMs: 5000, inThread: storeFetch(5000), workers: 1, idleMs: 60000, blockSize: 65536 });
  const port = server.address().port;
  const request = { method: "GET", url: "http://127.0.0.1:" + port + "/o", headers: { range: "bytes=0-2097151" } };
  sendHttp(workers.fetch, request, { op: "get", key: "o" }).then((r) => {
    // Bun's native XXH3-64 in the worker, as on the event loop (src/hash.ts).
    const sums = bodyBlockSums(r.body, 65536);
    const same = sums.length === 32 && [...sums].every((v, b) => v === xxh3_64(body.subarray(b * 65536, (b + 1) * 65536)));
    console.log("answered", workers.offThread, r.status, same ? "sums ok" : "sums differ");
  });
});
`,
    );
    const started = performance.now();
    const run = await new Deno.Command("npx", {
      args: ["-y", "bun@1", "run", script],
      cwd: REPO_ROOT,
      stdin: "null",
      signal: AbortSignal.timeout(30_000),
    }).output();
    const out = new TextDecoder().decode(run.stdout);
    assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
    assert.ok(performance.now() - started < 25_000, "the process ended by itself");
    assert.match(out, /answered 1 206 sums ok/);
  } finally {
    await dir.cleanup();
  }
});
