// The status page in a real browser (Debian's headless Chromium, driven by playwright-core),
// against the real agent on MinIO behind a proxy that can slow every request down. Three states,
// each checked in the DOM the page built for itself and saved as a PNG:
//   backlog  — the first pass mid-copy: /readyz already 200, progress N of M, rate and ETA;
//   healthy  — everything copied: ready, no red anywhere, the first pass done (no percent);
//   store down — MinIO killed with new segments waiting: "Uploads stalled" with the reason (the
//                partition whose copies fail, and their latest fault), in red (computed
//                colour), on the banner and the partition's row.
// The page refreshes itself (it fetches its fragment): the checks wait for the DOM to change with
// no navigation. Screenshots go to $TIERD_SCREENSHOT_DIR (default var/screenshots/ in the
// repository); their paths are printed. Skipped loudly without MinIO or Chromium (failed in CI).
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { chromium, type Page } from "playwright-core";
import { appendMessages } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { initHashes } from "../../src/hash.ts";
import {
  type AgentProcess,
  freePort,
  minioAvailable,
  ROOT,
  s3ConfigText,
  s3Env,
  spawnTierd,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { isExecutable, unavailable } from "../fixtures/_server.ts";
import { tempDir } from "../_util.ts";
import { startSlowProxy } from "./_slow_proxy.ts";

const CHROMIUM = Deno.env.get("TIERD_CHROMIUM") ?? "/usr/bin/chromium";
/** The flags that work on this project's machines (no network but the registries). */
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const SHOTS = Deno.env.get("TIERD_SCREENSHOT_DIR") ?? join(ROOT, "var/screenshots");
const RED = "rgb(176, 0, 0)"; // .bad { color: #b00000 }
const KiB = 1024;

const PARTITIONS: { topic: number; partition: number; format: FormatName }[] = [
  { topic: 1, partition: 0, format: "iggy-0.9" },
  { topic: 1, partition: 1, format: "iggy-0.9" },
  { topic: 2, partition: 0, format: "iggy-0.8" },
];

async function chromiumAvailable(): Promise<boolean> {
  if (await isExecutable(CHROMIUM)) return true;
  unavailable("status page in Chromium", `${CHROMIUM} not found (apt-get install -y chromium)`);
  return false;
}

/** Waits until `f` (run in the page) is true, re-evaluated as the page refreshes itself. */
async function until(page: Page, what: string, f: string, timeoutMs = 60_000): Promise<void> {
  try {
    await page.waitForFunction(f, undefined, { timeout: timeoutMs, polling: 250 });
  } catch (err) {
    const text = await page.locator("#status").innerText().catch(() => "(no page)");
    throw new Error(`${what}: not shown within ${timeoutMs} ms; the page says:\n${text}`, {
      cause: err,
    });
  }
}

const text = (id: string) => `(document.getElementById(${JSON.stringify(id)})?.textContent ?? "")`;

async function shot(page: Page, name: string): Promise<string> {
  await mkdir(SHOTS, { recursive: true });
  const path = join(SHOTS, `status-page-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.error(`screenshot: ${path}`);
  return path;
}

async function colorOf(page: Page, selector: string): Promise<string> {
  // Runs in the page, where globalThis is the window (Deno's types have no getComputedStyle).
  return await page.locator(selector).first().evaluate((e) =>
    (globalThis as unknown as { getComputedStyle(e: unknown): { color: string } })
      .getComputedStyle(e).color
  );
}

if (await minioAvailable("status page in Chromium") && await chromiumAvailable()) {
  Deno.test({
    name: "the status page in Chromium: backlog, healthy, store down",
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      await initHashes();
      const minio = (await startMinioReady())!;
      const proxy = await startSlowProxy(minio.endpoint, 150);
      const tmp = await tempDir("tierd-browser");
      const profile = await tempDir("tierd-chromium-profile");
      const listen = `127.0.0.1:${freePort()}`;
      const base = `http://${listen}`;
      let agent: AgentProcess | undefined;
      let context: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
      try {
        const dataDir = join(tmp.path, "broker");
        let seed = 1;
        const append = (p: (typeof PARTITIONS)[number], messages: number) =>
          appendMessages({
            format: p.format,
            dataDir,
            stream: 3,
            topic: p.topic,
            partition: p.partition,
            messages,
            segmentSize: 96 * KiB,
            payloadSize: 400,
            seed: seed++,
          });
        for (const p of PARTITIONS) await append(p, 3000); // ~14 sealed segments each
        const configPath = join(tmp.path, "tierd.toml");
        await writeFile(
          configPath,
          s3ConfigText({
            dir: tmp.path,
            minio,
            endpoint: proxy.endpoint,
            topics: [{ stream: 3, topic: 1 }, { stream: 3, topic: 2 }],
            uploadTimeout: "4 s",
            backoffMax: "1 s",
            listen,
          }),
        );
        agent = spawnTierd(["run", "--config", configPath], s3Env(minio));
        await agent.waitFor((l) => l.msg.startsWith("ready: "), 60_000);

        context = await chromium.launchPersistentContext(profile.path, {
          executablePath: CHROMIUM,
          headless: true,
          args: CHROMIUM_FLAGS,
          viewport: { width: 1500, height: 1000 },
        });
        const page = context.pages()[0] ?? await context.newPage();
        let navigations = 0;
        page.on("framenavigated", (f) => {
          if (f === page.mainFrame()) navigations++;
        });
        await page.goto(`${base}/?refresh=1`);
        const loaded = navigations;

        await t.step(
          "backlog: ready before the first pass ends, with progress, rate, ETA",
          async () => {
            await until(
              page,
              "first pass in progress with copies made",
              `${text("first-pass")}.includes("First pass in progress") && ` +
                `/, [1-9]\\d* of \\d+ segments copied/.test(${text("first-pass")}) && ` +
                `/ETA \\d/.test(${text("backlog")})`,
            );
            const ready = await fetch(`${base}/readyz`);
            assert.equal(ready.status, 200, "ready while the first pass still copies");
            await ready.body?.cancel();
            assert.equal(await page.locator("#ready").innerText(), "ready");
            assert.match(
              await page.locator("#backlog").innerText(),
              /Copy backlog: [1-9]\d* segments/,
            );
            assert.match(await page.locator("#backlog").innerText(), /rate [\d.]+ (B|KiB|MiB)\/s/);
            assert.ok(
              await page.locator("#partitions td i", { hasText: "first pass" }).count() > 0,
            );
            assert.equal(await page.locator("#topics tr").count(), 3, "a header and two topics");
            assert.equal(
              await page.locator("#partitions tr").count(),
              4,
              "a header and three partitions",
            );
            const status = await (await fetch(`${base}/v1/status`)).json();
            assert.equal(status.first_pass.done, false);
            await shot(page, "backlog");
          },
        );

        await t.step("healthy: everything copied, ready, nothing in red", async () => {
          proxy.setDelay(0);
          await until(
            page,
            "first pass done and no backlog",
            `${text("first-pass")}.includes("First pass done: 3 of 3 partitions") && ` +
              `${text("backlog")}.includes("Copy backlog: 0 segments") && ` +
              `${text("stall")}.includes("Uploads are flowing")`,
            120_000,
          );
          assert.equal(await page.locator("#status .bad").count(), 0, "nothing in red");
          // A first pass that is done is not "75 %": it says what it copied.
          const firstPass = await page.locator("#first-pass").innerText();
          assert.match(firstPass, /copied since start; nothing left to copy\.$/);
          assert.doesNotMatch(firstPass, /%/);
          assert.match(await page.locator("#last-pass").innerText(), /no errors/);
          assert.match(await page.locator("#cache").innerText(), /Cache: .* hit ratio/);
          assert.match(await page.locator("#housekeeping").innerText(), /Housekeeping: last run/);
          assert.equal(await colorOf(page, "#ready"), "rgb(23, 107, 31)");
          await shot(page, "healthy");
        });

        await t.step("store down: stalled, with the reason, in red", async () => {
          minio.kill();
          await append(PARTITIONS[0], 1500); // new sealed segments that cannot be copied now
          await until(
            page,
            "uploads stalled, with the partition whose copies fail",
            `${text("stall")}.includes("Uploads stalled") && ` +
              `${text("stall")}.includes("its copies failing since") && ` +
              `document.querySelector('[data-problem="stalled"]') !== null`,
            90_000,
          );
          const banner = await page.locator("#stall").innerText();
          assert.match(
            banner,
            /Uploads stalled since \S+ \S+ UTC \([^)]+\): store unreachable: .+/,
          );
          // The reason is what keeps uploads stalled: the partition whose copies fail, with
          // their latest fault, not whichever store call failed last.
          assert.match(
            banner,
            /: store unreachable: partition 3\/1\/0: .+ \(its copies failing since \S+ \S+ UTC, \d+ store faults?\)/,
          );
          const stalled = (await (await fetch(`${base}/v1/status`)).json()).stalled;
          assert.equal(stalled.cause.partition, "3/1/0");
          assert.equal(
            stalled.reason,
            `store unreachable: partition 3/1/0: ${stalled.cause.error}`,
          );
          assert.match(banner, /tierd resumes by itself when the store answers/);
          assert.equal(await colorOf(page, "#stall"), RED);
          const cell = page.locator('#partitions [data-problem="stalled"]').first();
          assert.match(await cell.innerText(), /^stalled: store unreachable/);
          assert.equal(await colorOf(page, '#partitions [data-problem="stalled"]'), RED);
          assert.match(
            await page.locator("#backlog").innerText(),
            /Copy backlog: [1-9]\d* segments/,
          );
          const topicRow = page.locator('#topics [data-problem="stalled"]').first();
          assert.match(await topicRow.innerText(), /partition 0: store unreachable/);
          await shot(page, "store-down");
        });

        assert.equal(navigations, loaded, "the page refreshed itself without reloading");
      } finally {
        await context?.close();
        agent?.kill("SIGTERM");
        await agent?.status;
        await proxy.close();
        await minio.stop();
        await profile.cleanup();
        await tmp.cleanup();
      }
    },
  });
}
