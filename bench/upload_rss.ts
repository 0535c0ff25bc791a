// `upload_peak_rss_mib`: the peak resident set of the compiled tierd binary while it copies two
// 1 GiB segments of one partition, sampled from /proc/<pid>/status (VmHWM, VmRSS) every 50 ms.
import { recordResult } from "./_results.ts";
import { ensureSegments, warmPageCache } from "./_segments.ts";
import { MiB, progress, round } from "./_stats.ts";
import { emptyPrefix, openBenchStore } from "./_store.ts";
import { runTierd } from "./_tierd.ts";
import { waitForQuiet } from "./_proc.ts";
import { TIERD_VARIANTS } from "./upload.ts";

const LAYOUT = { name: "1p-2x1GiB", partitions: 1, sealedPerPartition: 2, segmentSize: 1024 * MiB };
const SAMPLE_MS = 50;
const RUNS = 2;

/**
 * Runs the memory benchmark for every tierd configuration of the upload benchmark and records
 * the peak with tierd's defaults.
 * @returns the peak RSS in MiB
 */
export async function runUploadRssBench(): Promise<number> {
  const store = await openBenchStore();
  try {
    progress("upload_rss", `store: ${store.describe}`);
    const set = await ensureSegments(LAYOUT);
    const peaks: Record<string, Record<string, unknown>> = {};
    for (const [name, settings] of Object.entries(TIERD_VARIANTS)) {
      // GC timing moves the peak from run to run; the highest of RUNS runs counts.
      const runs: Record<string, unknown>[] = [];
      let peak = 0;
      for (let r = 0; r < RUNS; r++) {
        const prefix = `bench-rss/${Date.now().toString(36)}`;
        await warmPageCache(set);
        await waitForQuiet(10_000);
        const run = await runTierd(set, store, prefix, settings, SAMPLE_MS);
        await emptyPrefix(store.client, prefix + "/");
        const runPeak = (run.peakRssKiB ?? NaN) / 1024;
        const samples = run.rssSamplesKiB ?? [];
        peak = Math.max(peak, runPeak);
        runs.push({
          peak_rss_mib: round(runPeak, 1),
          seconds: round(run.seconds, 2),
          mb_per_s: round(set.bytes / 1e6 / run.seconds, 1),
          samples: samples.length,
          rss_mib_at_25_50_75_percent_of_run: [0.25, 0.5, 0.75].map((f) =>
            round((samples[Math.floor(f * (samples.length - 1))] ?? NaN) / 1024, 1)
          ),
        });
        peaks[name] = { peak_rss_mib: round(peak, 1), effective: run.effective, runs };
        progress(
          "upload_rss",
          `${name} run ${r + 1}/${RUNS}: peak RSS ${runPeak.toFixed(1)} MiB over ` +
            `${samples.length} samples, ${run.seconds.toFixed(1)} s`,
        );
      }
    }
    const headline = Object.keys(TIERD_VARIANTS)[0];
    const value = peaks[headline].peak_rss_mib as number;
    recordResult("upload_peak_rss_mib", value, "≤ 256", {
      method:
        `The compiled tierd binary runs \`tierd run --once\` (fresh state directory and key ` +
        `prefix) over one partition holding ${set.sealed.length} sealed Iggy 0.9 segments of ` +
        `1 GiB (${(set.bytes / MiB).toFixed(0)} MiB with indexes) into ${store.describe}; ` +
        `/proc/<pid>/status is read every ${SAMPLE_MS} ms until exit and the peak is the largest ` +
        `VmHWM (high-water mark, so peaks between samples count) seen, highest of ${RUNS} runs. ` +
        `The value is the peak ` +
        `with tierd's default settings ("${headline}"); every other configuration of the ` +
        `upload benchmark is run too and reported below.`,
      settings: Object.fromEntries(
        Object.entries(peaks).map(([n, p]) => [n, p.effective as Record<string, string>]),
      ),
      peaks,
      headline_config: headline,
      notes: Object.entries(peaks).map(([n, p]) => `${n}: ${p.peak_rss_mib} MiB`).join("; "),
    });
    return value;
  } finally {
    await store.stop();
  }
}
