// `deno task bench [name...]`: runs the named benchmarks (all when none is named), merges their
// figures into bench/results/latest.json and regenerates bench/RESULTS.md.
// Options come from the environment: TIERD_BENCH_S3_* (a real store; else a local MinIO),
// TIERD_BENCH_ROUNDS, TIERD_BENCH_BIN (an already built tierd binary), TIERD_BENCH_AWS,
// TIERD_BENCH_RCLONE and TIERD_BENCH_CURL (peer programs; a missing one leaves its figure "not
// measured"), TIERD_BENCH_SEGMENT_MIB (a smoke run: small segments for the upload and read
// benchmarks, figures marked as smoke; read_cold needs at least 64).
import { RESULTS_JSON, RESULTS_MD, writeResults } from "./_results.ts";
import { progress } from "./_stats.ts";

/** A benchmark: records its figures with `recordResult`. */
interface Bench {
  describe: string;
  run(): Promise<unknown>;
}

const rounds = (fallback: number) => {
  const n = Number(Deno.env.get("TIERD_BENCH_ROUNDS"));
  return Number.isInteger(n) && n > 0 ? n : fallback;
};

const BENCHES: Record<string, Bench> = {
  sign: {
    describe: "SigV4 signatures/s: tierd ÷ aws4fetch (and @smithy/signature-v4)",
    run: async () => (await import("./sign.ts")).runSignBench({ rounds: rounds(15) }),
  },
  upload: {
    describe: "MB/s copying sealed segments to S3: tierd ÷ rclone, ÷ aws s3 cp, ÷ curl PUTs",
    run: async () => (await import("./upload.ts")).runUploadBench({ rounds: rounds(3) }),
  },
  upload_rss: {
    describe: "peak RSS of tierd copying 1 GiB segments",
    run: async () => (await import("./upload_rss.ts")).runUploadRssBench(),
  },
  read_cold: {
    describe: "first byte of a cold read through the API ÷ a direct ranged GET",
    run: async () => (await import("./read_cold.ts")).runReadColdBench(),
  },
  read_warm: {
    describe: "MB/s reading cached remote data ÷ a local segment, same API",
    run: async () => (await import("./read_warm.ts")).runReadWarmBench(),
  },
  read_scan: {
    describe:
      "sequential cold scan MB/s, plain client: readahead ÷ none, ÷ a direct GET; 16 at once",
    run: async () => (await import("./read_scan.ts")).runReadScanBench({ rounds: rounds(2) }),
  },
  read_rss: {
    describe: "peak RSS of the agent under 24 concurrent 64 MiB reads, cold and cached",
    run: async () => (await import("./read_rss.ts")).runReadRssBench(),
  },
  read_cache: {
    describe: "chunk-cache hit ratio, tail readers + backfill: tierd ÷ a plain LRU",
    run: async () => (await import("./read_cache.ts")).runReadCacheBench(),
  },
  verify: {
    describe: "MB/s proving a copy's bytes before eviction: stored checksum, read-back, fs",
    run: async () => (await import("./verify.ts")).runVerifyBench({ rounds: rounds(5) }),
  },
  iggy_tcp: {
    describe:
      "tierd's Iggy binary front ÷ the 0.8.0 broker direct: produce, local polls, latency, cold",
    run: async () => (await import("./iggy_tcp.ts")).runIggyTcpBench({ rounds: rounds(3) }),
  },
  read_boot: {
    describe: "boot seconds and RSS per segment with journals of 100k segments",
    run: async () => (await import("./read_boot.ts")).runReadBootBench(),
  },
};

const USAGE = `usage: deno task bench [${Object.keys(BENCHES).join("|")} ...]\n\n` +
  Object.entries(BENCHES).map(([n, b]) => `  ${n.padEnd(12)} ${b.describe}`).join("\n");

async function main(args: string[]): Promise<number> {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(USAGE);
    return 0;
  }
  const unknown = args.filter((a) => !(a in BENCHES));
  if (unknown.length > 0) {
    console.error(`bench: unknown benchmark ${unknown.join(", ")}\n\n${USAGE}`);
    return 2;
  }
  const selected = args.length > 0 ? args : Object.keys(BENCHES);
  let failed = 0;
  for (const name of selected) {
    const started = performance.now();
    progress(name, "starting");
    try {
      await BENCHES[name].run();
      progress(name, `done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    } catch (err) {
      failed++;
      console.error(`[bench ${name}] FAILED: ${err instanceof Error ? err.stack : String(err)}`);
    }
    // Write after each benchmark, so a later failure keeps the earlier figures.
    await writeResults();
  }
  const file = await writeResults();
  console.error(`\nbench: wrote ${RESULTS_JSON} and ${RESULTS_MD}`);
  for (const name of Object.keys(file.results)) {
    const r = file.results[name];
    console.error(
      `  ${name.padEnd(40)} ${String(r.value ?? "-").padEnd(10)} ${r.target.padEnd(22)} ` +
        `${
          r.value === null ? "NOT MEASURED" : r.met === null ? "no goal" : r.met ? "met" : "NOT MET"
        }`,
    );
  }
  return failed > 0 ? 1 : 0;
}

Deno.exit(await main(Deno.args));
