// Issue 22: a damaged journal rebuilt from a store whose listing of the partition never ends —
// (a) slow pages, endless, each with a new token and no new key; (b) a continuation token that
// repeats. The real `tierd run` on a partition tiered to MinIO and mostly evicted, its journal
// damaged (one byte flipped mid-file), the store reached through a scripted proxy. While the
// partition cannot be rebuilt, a read of an evicted offset answers 503 `partition_rebuilding`
// with Retry-After — never 416 `offset_below_retention` (a consumer that follows the 416 skips
// messages that exist), never 404; `/v1/partitions` lists the partition `opening` or `failed`, and
// `/v1/status` says why; the agent's memory does not keep growing. Once the proxy heals, the
// partition opens (rebuilt from the bucket) and every offset reads back byte-identical.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { sleep } from "../../src/base/clock.ts";
import type { PartitionJson } from "../../src/http/app.ts";
import type { StatusJson } from "../../src/http/status_model.ts";
import { partitionRoot } from "../../src/layout/object_keys.ts";
import { parseConfig } from "../../src/config/load.ts";
import {
  type AgentProcess,
  minioAvailable,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import type { MinioServer } from "../fixtures/minio.ts";
import {
  type Api,
  assertEverythingReadable,
  damagedJournals,
  flipByte,
  journalPositions,
  recoveryConfigText,
  type RecoveryRig,
  recoveryRig,
} from "./_recovery.ts";
import {
  emptyTruncatedPage,
  type ProxiedRequest,
  type ScriptAnswer,
  startScriptedS3Proxy,
  truncatedWith,
} from "./_s3_script_proxy.ts";

/** How long the agent is watched while it cannot rebuild. */
const WATCH_MS = 20_000;
/** How often it is asked and its RSS sampled meanwhile. */
const SAMPLE_MS = 1_000;
/**
 * How much the RSS may rise over the whole watch, from the first sample (taken as the rebuild's
 * first listing is seen) to the highest. Measured here: the bounded rebuild rises 5 to 20 MiB
 * (the runtime warming up to serve the HTTP API and status); the unbounded one of the code before
 * the listing bounds rose ~100 MiB within 6 s on the repeating token (12 000 listings), the issue's
 * 185 → 267 MB in 60 s. 48 MiB leaves room for a loaded machine and fails such a listing.
 */
const RSS_RISE_BOUND_KIB = 48 * 1024;
/**
 * How much the JavaScript heap in use (`tierd_heap_used_bytes`) may still rise in the second half
 * of the watch: from the highest of samples 3–7 to the highest of the last five. A listing that
 * holds what it pages through keeps it rising at its rate for as long as it runs. Not the RSS:
 * the runtime reserves heap in steps under a high allocation rate (here a rebuild tried every
 * 200 ms) and gives it back late, so the RSS rose 14–21 MiB in this stretch while the heap in
 * use stayed between 21 and 33 MiB, collected back down every few seconds (measured with
 * `process.memoryUsage()` at each pass).
 */
const HEAP_LATE_RISE_BOUND_KIB = 16 * 1024;
/** A slow page's wait, case (a). */
const SLOW_PAGE_MS = 4_000;

/** A broken listing of the partition root, and what the test expects of it. */
interface Row {
  name: string;
  /** The answer to a ListObjectsV2 of the partition root; `healed` resolves when the proxy heals. */
  listing(r: ProxiedRequest, healed: Promise<void>): Promise<ScriptAnswer | undefined>;
  /** What the partition's `failed` detail must say, once it failed (undefined: anything). */
  failure?: RegExp;
}

const ROWS: Row[] = [
  {
    name: "slow endless pages (a new token each, no new key)",
    listing: (() => {
      let n = 0;
      return async (r, healed) => {
        if (!r.query.has("continuation-token")) return truncatedWith(`slow-${++n}`);
        // Seconds per page, without end; a healed proxy lets MinIO answer the (unknown) token.
        const woke = await Promise.race([
          sleep(SLOW_PAGE_MS).then(() => "slow"),
          healed.then(() => "healed"),
        ]);
        if (woke === "healed") return undefined;
        return emptyTruncatedPage(minioBucket, r.query.get("prefix") ?? "", `slow-${++n}`);
      };
    })(),
  },
  {
    name: "a continuation token that repeats",
    listing: (r) =>
      Promise.resolve(
        r.query.has("continuation-token")
          ? emptyTruncatedPage(minioBucket, r.query.get("prefix") ?? "", "loop-token")
          : truncatedWith("loop-token"),
      ),
    failure: /ListingLoop|repeat|loop/i,
  },
];

/** The bucket's name, for the proxy's own pages (set once MinIO runs). */
let minioBucket = "";

/** The agent's resident set, from `/proc/<pid>/status`, in KiB. */
/** The agent's `tierd_heap_used_bytes`, in KiB. */
async function heapUsedKiB(api: Api): Promise<number> {
  const text = await (await api("/metrics")).text();
  const m = /^tierd_heap_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
  assert.ok(m, "no tierd_heap_used_bytes in /metrics");
  return Number(m[1]) / 1024;
}

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  assert.ok(m, `no VmRSS in /proc/${pid}/status`);
  return Number(m[1]);
}

/** The rig's config, its store reached through `endpoint`, written beside the rig's own. */
async function proxiedConfig(rig: RecoveryRig, minio: MinioServer, endpoint: string) {
  const text = recoveryConfigText(rig.root, {
    store: { kind: "minio", minio: { ...minio, endpoint } },
    prefix: rig.prefix,
    id: rig.id,
    segmentSize: 16 * 1024,
    // Nothing but the rebuild asks the bucket about copies while it is watched.
    extra: `[tiered_storage.housekeeping]\nverify_interval = "unlimited"\n`,
  });
  const configPath = join(rig.root, "tierd-proxied.toml");
  await writeFile(configPath, text);
  return { configPath, config: parseConfig(text, configPath, rig.env) };
}

async function partitionOf(api: Api, rig: RecoveryRig): Promise<PartitionJson> {
  const res = await api("/v1/partitions");
  assert.equal(res.status, 200);
  const all = await res.json() as PartitionJson[];
  const p = all.find((x) =>
    x.stream === rig.id.stream && x.topic === rig.id.topic && x.partition === rig.id.partition
  );
  assert.ok(p, `the partition is not in /v1/partitions: ${JSON.stringify(all)}`);
  return p;
}

/** Waits until `check` holds (polled), or fails naming what was last seen. */
async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T>,
  check: (v: T) => boolean,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await probe();
    if (check(last)) return last;
    await sleep(200);
  }
  assert.fail(`${what}: not within ${timeoutMs} ms; last seen ${JSON.stringify(last)}`);
}

/** One read of an evicted offset while the partition cannot be rebuilt: 503, retry, why. */
async function assertRetry(api: Api, rig: RecoveryRig, offset: bigint, at: string) {
  const path = `/v1/streams/${rig.id.stream}/topics/${rig.id.topic}/partitions/` +
    `${rig.id.partition}/records?offset=${offset}&max_bytes=4096`;
  const res = await api(path);
  const text = await res.text();
  assert.notEqual(res.status, 416, `${at}: 416 for offset ${offset}, which exists: ${text}`);
  assert.notEqual(res.status, 404, `${at}: 404 for offset ${offset}, which exists: ${text}`);
  assert.equal(res.status, 503, `${at}: offset ${offset}: ${res.status} ${text}`);
  const body = JSON.parse(text);
  assert.equal(body.error, "partition_rebuilding", `${at}: ${text}`);
  const retry = Number(res.headers.get("retry-after"));
  assert.ok(Number.isInteger(retry) && retry >= 1, `${at}: Retry-After ${retry}`);
}

if (await minioAvailable("rebuild under a slow or looping listing")) {
  for (const row of ROWS) {
    Deno.test(`a damaged journal rebuilt under ${row.name}: reads answer 503 partition_rebuilding, never 416; memory bounded; healed, every offset reads back`, async () => {
      const minio = (await startMinioReady())!;
      minioBucket = minio.bucket;
      const proxy = await startScriptedS3Proxy(minio.endpoint);
      let agent: AgentProcess | undefined;
      let rig: RecoveryRig | undefined;
      try {
        rig = await recoveryRig({ format: "iggy-0.9", store: { kind: "minio", minio } });
        // One byte flipped mid-file: the journal is set aside, the partition rebuilt from the
        // bucket, whose listing of the partition root is what the proxy breaks.
        const size = (await Deno.stat(rig.journal)).size;
        assert.ok((await journalPositions(rig)).length > 4);
        await flipByte(rig.journal, Math.floor(size / 2));
        const root = partitionRoot({ prefix: rig.prefix, clusterId: "local", ...rig.id });
        let heal!: () => void;
        const healed = new Promise<void>((resolve) => (heal = resolve));
        let broken = true;
        proxy.script((r) =>
          broken && r.op === "ListObjectsV2" && r.query.get("prefix") === root
            ? row.listing(r, healed)
            : undefined
        );
        const { configPath, config } = await proxiedConfig(rig, minio, proxy.endpoint);
        const base = `http://${config.agent.listen}`;
        const api: Api = (path) => fetch(base + path);

        agent = spawnTierd(["run", "--config", configPath], rig.env);
        await agent.waitFor((l) => l.msg === "http api listening", 30_000);
        // The rebuild has begun: the partition root was listed through the proxy.
        await until(
          "the rebuild lists the partition root",
          30_000,
          () => Promise.resolve(proxy.seen.filter((r) => r.query.get("prefix") === root).length),
          (n) => n > 0,
        );

        const offset = rig.evicted[1] + 3n;
        assert.ok(offset < rig.evicted[2], "an offset inside an evicted segment");
        const samples: number[] = [];
        const heap: number[] = [];
        const states = new Set<string | null>();
        /** A failure detail that names the listing's prefix but not the store (checked last). */
        let storeUnnamed: string | undefined;
        let detail = "";
        for (let i = 0; i * SAMPLE_MS < WATCH_MS; i++) {
          const at = `after ${(i * SAMPLE_MS) / 1000} s`;
          samples.push(await rssKiB(agent.pid));
          heap.push(await heapUsedKiB(api));
          await assertRetry(api, rig, offset, at);
          const p = await partitionOf(api, rig);
          states.add(p.state);
          assert.ok(
            p.state === "opening" || p.state === "failed",
            `${at}: the partition is ${p.state}: ${JSON.stringify(p)}`,
          );
          assert.ok(p.state_detail, `${at}: no state_detail`);
          detail = p.state_detail;
          if (p.state === "failed" && row.failure) {
            assert.match(p.state_detail, row.failure, at);
            assert.ok(p.state_detail.includes(root), `${at}: the prefix is not named`);
            // And the store: which bucket (at which endpoint) the broken listing came from.
            if (!p.state_detail.includes(minio.bucket)) storeUnnamed = p.state_detail;
          }
          // The status says why, as the status page shows it.
          const status = await (await api("/v1/status")).json() as StatusJson;
          const sp = status.partitions.find((x) => x.partition === rig!.id.partition)!;
          const problem = sp.problems.find((q) => q.kind === "opening" || q.kind === "failed");
          assert.ok(problem, `${at}: /v1/status names no problem: ${JSON.stringify(sp)}`);
          assert.ok(problem.reason.length > 20, `${at}: ${problem.reason}`);
          await sleep(SAMPLE_MS);
        }
        const listed = proxy.seen.filter((r) => r.query.get("prefix") === root);
        assert.ok(
          listed.some((r) => r.query.has("continuation-token")),
          "the agent followed the broken listing's token",
        );
        // Memory: not much above where it started, and not rising any more by the end (the
        // highest sample of each stretch, so one GC at the wrong moment does not hide a rise).
        const mib = (kib: number) => (kib / 1024).toFixed(1);
        const trace = samples.map((x) => (x / 1024).toFixed(0)).join(" ");
        const rise = Math.max(...samples) - samples[0];
        assert.ok(
          rise <= RSS_RISE_BOUND_KIB,
          `RSS rose ${mib(rise)} MiB over ${WATCH_MS / 1000} s (bound ` +
            `${mib(RSS_RISE_BOUND_KIB)} MiB): ${trace}`,
        );
        const heapTrace = heap.map((x) => (x / 1024).toFixed(0)).join(" ");
        const lateRise = Math.max(...heap.slice(-5)) - Math.max(...heap.slice(3, 8));
        assert.ok(
          lateRise <= HEAP_LATE_RISE_BOUND_KIB,
          `the heap in use still rose ${mib(lateRise)} MiB in the second half of the watch ` +
            `(bound ${mib(HEAP_LATE_RISE_BOUND_KIB)} MiB): ${heapTrace} (RSS ${trace})`,
        );
        console.log(
          `${row.name}: states ${[...states]}, ${listed.length} listings of the root, RSS MiB ` +
            samples.map((s) => (s / 1024).toFixed(0)).join(" ") + `, heap in use MiB ${heapTrace}` +
            `\nlast detail: ${detail}`,
        );

        // Healed: the partition opens, rebuilt from the bucket, and every offset reads back.
        broken = false;
        heal();
        const opened = await until(
          "the partition opens once the listing heals",
          45_000,
          () => partitionOf(api, rig!),
          (p) => p.state === "rebuilt" || p.state === "ok",
        );
        assert.equal(opened.state, "rebuilt", JSON.stringify(opened));
        assert.equal((await damagedJournals(rig)).length, 1, "the damaged journal kept aside");
        await assertEverythingReadable(rig, api);
        assert.equal(
          storeUnnamed,
          undefined,
          `the listing's failure does not name the store (bucket '${minio.bucket}')`,
        );
        assert.ok(
          !agent.lines.some((l) => /offset_below_retention/.test(JSON.stringify(l))),
          "no line mentions offset_below_retention",
        );
      } finally {
        if (agent) {
          agent.kill("SIGTERM");
          const status = await agent.status;
          if (status.code !== 0) console.error(agent.output().slice(-4000));
        }
        await proxy.close();
        await rig?.cleanup();
        await minio.stop();
      }
    });
  }
}
