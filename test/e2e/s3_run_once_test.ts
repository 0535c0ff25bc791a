// `tierd run --once` against a real MinIO, checked with plain signed requests (aws4fetch, not
// tierd's client): every sealed segment of an 0.8, an 0.9 and a multipart-sized partition is in
// the bucket byte for byte, with its user metadata. Plus `tierd probe` with good and
// bad keys, never showing a secret. Skipped loudly without MinIO (failed in CI).
import { listBounded } from "../../providers/listing.ts";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { AwsClient } from "aws4fetch";

import { type GeneratedSegment, generatePartition } from "../../src/format/generate.ts";
import type { FormatName } from "../../src/format/types.ts";
import { hex128, initHashes, xxh3_128 } from "../../src/hash.ts";
import { segmentStem } from "../../src/layout/partition.ts";
import { decodeRecords } from "../../src/state/journal.ts";
import { fold } from "../../src/state/segment_state.ts";
import { VERSION } from "../../src/version.ts";
import {
  minioAvailable,
  minioStore,
  runTierd,
  s3ConfigText,
  s3Env,
  startMinioReady,
} from "../fixtures/_agent.ts";
import { tempDir } from "../_util.ts";
import { decodeOwnerRecord } from "../../src/ownership/owner_record.ts";
import { decodeManifest } from "../../src/layout/manifest.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const STREAM = 3;
const TOPIC = 1;

/** The partitions generated: one per format, and one whose sealed segment needs multipart. */
const PARTITIONS: {
  partition: number;
  format: FormatName;
  messages: number;
  segmentSize: number;
  payloadSize: number;
}[] = [
  { partition: 0, format: "iggy-0.8", messages: 3000, segmentSize: 300 * KiB, payloadSize: 256 },
  { partition: 1, format: "iggy-0.9", messages: 3000, segmentSize: 300 * KiB, payloadSize: 256 },
  // ~6.1 MiB sealed segment: parts of 5 MiB + the rest, then a small active segment.
  { partition: 2, format: "iggy-0.9", messages: 1700, segmentSize: 6 * MiB, payloadSize: 4000 },
];

if (await minioAvailable("tierd run --once against MinIO")) {
  Deno.test("run --once copies 0.8, 0.9 and multipart segments to MinIO exactly", async (t) => {
    await initHashes();
    const minio = (await startMinioReady())!;
    const tmp = await tempDir("tierd-s3-once");
    try {
      const generated = new Map<number, GeneratedSegment[]>();
      for (const p of PARTITIONS) {
        generated.set(
          p.partition,
          await generatePartition({
            format: p.format,
            dataDir: join(tmp.path, "broker"),
            stream: STREAM,
            topic: TOPIC,
            partition: p.partition,
            messages: p.messages,
            segmentSize: p.segmentSize,
            payloadSize: p.payloadSize,
            seed: 7 + p.partition,
          }),
        );
      }
      const big = generated.get(2)!.slice(0, -1);
      assert.ok(big.length === 1 && big[0].size > 5 * MiB, "partition 2 needs a multipart copy");
      for (const p of [0, 1]) {
        const sealed = generated.get(p)!.slice(0, -1);
        assert.ok(sealed.length >= 2, `partition ${p} has ${sealed.length} sealed segments`);
        assert.ok(sealed.every((s) => s.size > 200 * KiB && s.size < MiB));
      }

      const configPath = join(tmp.path, "tierd.toml");
      await writeFile(
        configPath,
        s3ConfigText({ dir: tmp.path, minio, topics: [{ stream: STREAM, topic: TOPIC }] }),
      );
      const env = s3Env(minio);

      await t.step("probe exits 0 against MinIO", async () => {
        const probe = await runTierd(["probe", "--config", configPath], env);
        assert.equal(probe.code, 0, probe.stderr);
        assert.match(probe.stdout, /probe ok/);
        assert.ok(!(probe.stdout + probe.stderr).includes(minio.secretKey), "secret shown");
      });

      await t.step("probe with a wrong secret key fails with one line, secret unseen", async () => {
        const wrong = `${minio.secretKey.slice(0, 8)}WRONGwrong${minio.secretKey.slice(8)}`;
        const probe = await runTierd(["probe", "--config", configPath], s3Env(minio, wrong));
        assert.notEqual(probe.code, 0);
        assert.equal(probe.stdout, "");
        const reason = probe.stderr.trimEnd();
        assert.equal(reason.split("\n").length, 1, `not one line:\n${reason}`);
        assert.match(reason, /^tierd: probe failed: .*(credential|signature|secret)/i);
        for (const secret of [wrong, minio.secretKey]) {
          assert.ok(!(probe.stdout + probe.stderr).includes(secret), "a secret was shown");
        }
        // The same bad key keeps the agent from starting at all.
        const run = await runTierd(["run", "--once", "--config", configPath], s3Env(minio, wrong));
        assert.equal(run.code, 1);
        assert.match(run.stderr, /probe failed/);
        assert.ok(!run.stderr.includes(wrong));
      });

      await t.step("run --once copies every sealed segment, nothing else", async () => {
        const once = await runTierd(["run", "--once", "--config", configPath], env);
        assert.equal(once.code, 0, once.stderr);
        assert.ok(!(once.stdout + once.stderr).includes(minio.secretKey), "secret shown");
        const finished = once.lines.find((l) => l.msg === "pass finished");
        assert.ok(finished, once.stderr);
        const sealed = [...generated.values()].reduce((n, segs) => n + segs.length - 1, 0);
        assert.equal(finished.copied, sealed);
        assert.equal(finished.failed, 0);
        assert.equal(finished.pending, 0);
      });

      await t.step("every object's bytes and metadata, by plain GET and HEAD", async () => {
        const aws = new AwsClient({
          accessKeyId: minio.accessKey,
          secretAccessKey: minio.secretKey,
          service: "s3",
          region: minio.region,
        });
        const url = (key: string) =>
          `${minio.endpoint}/${minio.bucket}/${key.split("/").map(encodeURIComponent).join("/")}`;
        const objects = await listBounded(minioStore(minio), "iggy/");
        const expectedKeys: string[] = [];
        for (const p of PARTITIONS) {
          const journal = await readFile(
            join(
              tmp.path,
              `state/streams/${STREAM}/topics/${TOPIC}/partitions/${p.partition}/journal`,
            ),
          );
          const decoded = decodeRecords(new Uint8Array(journal));
          assert.equal(decoded.torn, undefined);
          const state = fold(decoded.events);
          assert.ok(state.incarnation !== undefined);
          const base = `iggy/local/${STREAM}/${TOPIC}/${p.partition}/` +
            `${state.incarnation.toString(16).padStart(16, "0")}-0/`;
          const segments = generated.get(p.partition)!;
          for (const seg of segments.slice(0, -1)) {
            const stem = segmentStem(seg.startOffset);
            const log = new Uint8Array(await readFile(seg.logPath));
            const index = new Uint8Array(await readFile(seg.indexPath));
            assert.equal(log.length, seg.size);

            const logKey = `${base}${stem}.log`;
            const indexKey = `${base}${stem}.index`;
            expectedKeys.push(logKey, indexKey);

            const get = await aws.fetch(url(logKey));
            assert.equal(get.status, 200, logKey);
            const got = new Uint8Array(await get.arrayBuffer());
            assert.equal(got.length, log.length, `${logKey} size`);
            assert.ok(equalBytes(got, log), `${logKey} bytes differ from ${seg.logPath}`);

            const head = await aws.fetch(url(logKey), { method: "HEAD" });
            assert.equal(head.status, 200);
            assert.equal(head.headers.get("content-length"), String(seg.size));
            assert.deepEqual(userMetadata(head.headers), {
              "end-offset": String(seg.endOffset),
              "start-timestamp": String(seg.startTimestamp),
              "end-timestamp": String(seg.endTimestamp),
              "max-timestamp": String(seg.maxTimestamp),
              "size": String(seg.size),
              "index-size": String(seg.indexSize),
              "format": p.format,
              "xxh3-128": hex128(xxh3_128(log)),
              "tierd-version": VERSION,
            }, `${logKey} metadata`);
            if (seg.size > 5 * MiB) {
              // A multipart ETag is "md5-of-part-md5s-N": proof that it really went in parts.
              assert.match(head.headers.get("etag") ?? "", /-2"?$/, `${logKey} not multipart`);
            }

            const iget = await aws.fetch(url(indexKey));
            assert.equal(iget.status, 200, indexKey);
            const igot = new Uint8Array(await iget.arrayBuffer());
            assert.ok(equalBytes(igot, index), `${indexKey} bytes differ from ${seg.indexPath}`);
            const ihead = await aws.fetch(url(indexKey), { method: "HEAD" });
            assert.equal(ihead.status, 200);
            assert.equal(ihead.headers.get("content-length"), String(index.length));
            assert.equal(ihead.headers.get("x-amz-meta-xxh3-128"), hex128(xxh3_128(index)));

            // The journal agrees with the object.
            const rec = state.segments.get(0n)?.get(seg.startOffset);
            assert.equal(rec?.state, "COPY_SEGMENT_FINISHED");
            assert.equal(rec.meta?.checksum, xxh3_128(log));
            assert.equal(rec.meta?.endOffset, seg.endOffset);
          }
          // The active segment stays local.
          const active = segmentStem(segments.at(-1)!.startOffset);
          assert.ok(!objects.some((o) => o.key.startsWith(base) && o.key.includes(active)));
          // The partition's manifest lists exactly the copies, with their facts.
          const manifestKey = `iggy/local/meta/${STREAM}/${TOPIC}/${p.partition}/` +
            `${state.incarnation.toString(16).padStart(16, "0")}-0/manifest.json`;
          expectedKeys.push(manifestKey);
          const mget = await aws.fetch(url(manifestKey));
          assert.equal(mget.status, 200, manifestKey);
          const manifest = decodeManifest(manifestKey, new Uint8Array(await mget.arrayBuffer()));
          assert.equal(manifest.format, p.format);
          assert.equal(manifest.incarnation, state.incarnation);
          assert.deepEqual(
            manifest.segments.map((m) => [m.start, m.endOffset, m.size, m.checksum]),
            await Promise.all(
              segments.slice(0, -1).map(async (seg) => [
                seg.startOffset,
                seg.endOffset,
                seg.size,
                xxh3_128(new Uint8Array(await readFile(seg.logPath))),
              ]),
            ),
          );
        }
        // The key space's owner record: this agent, named in its state dir's agent.json.
        const owner = decodeOwnerRecord(
          "iggy/local/owner.json",
          new Uint8Array(await (await aws.fetch(url("iggy/local/owner.json"))).arrayBuffer()),
        );
        const identity = JSON.parse(await readFile(join(tmp.path, "state", "agent.json"), "utf8"));
        assert.equal(owner.agentId, identity.agent_id);
        expectedKeys.push("iggy/local/owner.json");
        assert.deepEqual(objects.map((o) => o.key).sort(), expectedKeys.sort());
        assert.deepEqual(await minioStore(minio).listMultipartUploads("iggy/"), []);
      });

      await t.step("a second run --once is a no-op", async () => {
        const again = await runTierd(["run", "--once", "--config", configPath], env);
        assert.equal(again.code, 0, again.stderr);
        const finished = again.lines.find((l) => l.msg === "pass finished");
        assert.equal(finished?.copied, 0);
        assert.equal(finished?.pending, 0);
      });
    } finally {
      await minio.stop();
      await tmp.cleanup();
    }
  });
} else {
  Deno.test({ name: "run --once against MinIO (skipped: no MinIO)", ignore: true, fn() {} });
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The `x-amz-meta-*` headers of a response, without the prefix. */
function userMetadata(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (name.startsWith("x-amz-meta-")) out[name.slice("x-amz-meta-".length)] = value;
  });
  return out;
}
