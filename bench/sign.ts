// `sign_ratio_vs_aws4fetch`: SigV4 signatures per second over one fixed set of varied S3
// requests, tierd's `signRequest` ÷ aws4fetch's `AwsClient.sign`; @smithy/signature-v4 (the AWS
// SDK's signer, with the Node SDK's node:crypto hash) is reported beside them.
import { createHash, createHmac } from "node:crypto";
import process from "node:process";
import { SignatureV4 } from "@smithy/signature-v4";
import { AwsClient } from "aws4fetch";
import {
  type Credentials,
  EMPTY_SHA256,
  type QueryParam,
  type SigningKeyEntry,
  signRequest,
  UNSIGNED_PAYLOAD,
} from "../providers/s3/sigv4.ts";
import { recordResult } from "./_results.ts";
import { median, progress, round } from "./_stats.ts";
import { seededRandom } from "../src/base/rng.ts";

/** Options of {@link runSignBench}. */
export interface SignBenchOptions {
  /** Requests in the set. @default 2000 */
  requests?: number;
  /** Timed rounds per signer; the median round counts. @default 9 */
  rounds?: number;
  /** Untimed rounds per signer first. @default 3 */
  warmupRounds?: number;
}

/** One request to sign, in the shape each signer needs (prepared outside the timed loop). */
interface SignCase {
  method: string;
  /** The raw path, `/bucket/key`. */
  path: string;
  query: QueryParam[];
  /** Headers to sign besides host, x-amz-date and x-amz-content-sha256. */
  headers: Record<string, string>;
  payloadHash: string;
  /** The URL tierd sends (encoded path, canonical query): what aws4fetch is handed. */
  url: string;
  /** The URI-encoded path, for smithy (S3 paths are encoded once, by the caller). */
  encodedPath: string;
}

const HOST = "127.0.0.1:9000";
const REGION = "eu-west-1";
const NOW = new Date("2026-03-14T15:09:26Z");
const CREDENTIALS: Credentials = {
  accessKeyId: "AKIDBENCHEXAMPLE1234",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYBENCHKEY00",
};

const KEY_PARTS = [
  "iggy/local/1/2/0/3f1c9a0b7d2e4c55-0/00000000000000123456.log",
  "iggy/local/1/2/0/3f1c9a0b7d2e4c55-0/00000000000000123456.index",
  "iggy/local/meta/1/2/0/3f1c9a0b7d2e4c55-0/manifest.json",
  "données/été 2024/ключ-сегмента.log",
  "with space/and+plus=equals&amp.log",
  "emoji/🚀 rocket/日本語のキー.bin",
  "quotes/'single' (paren) !bang *star.log",
  "tilde~under_score-dash.dot/a.b.c",
  "deep/" + "nested/".repeat(12) + "leaf.log",
  "percent%20literal/%2F/%.log",
];

/** A deterministic, varied set of S3 requests: the calls tierd makes, plus awkward keys. */
export function buildSignCases(count: number, seed = 7): SignCase[] {
  const rand = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)];
  const hex = (n: number) =>
    Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join("");
  const cases: SignCase[] = [];
  for (let i = 0; i < count; i++) {
    const key = `${pick(KEY_PARTS)}${rand() < 0.3 ? `-${i}` : ""}`;
    let method = "GET";
    let query: QueryParam[] = [];
    const headers: Record<string, string> = {};
    let payloadHash = UNSIGNED_PAYLOAD;
    let path = `/tierd-bench/${key}`;
    switch (i % 8) {
      case 0: // ranged GET (cache fill)
        headers.range = `bytes=${Math.floor(rand() * 1e9)}-${Math.floor(rand() * 1e9) + 1e9}`;
        break;
      case 1: // conditional create with segment metadata
        method = "PUT";
        headers["if-none-match"] = "*";
        headers["content-type"] = "application/octet-stream";
        headers["x-amz-meta-end-offset"] = String(Math.floor(rand() * 1e12));
        headers["x-amz-meta-start-timestamp"] = String(1_750_000_000_000_000 + i);
        headers["x-amz-meta-end-timestamp"] = String(1_750_000_100_000_000 + i);
        headers["x-amz-meta-max-timestamp"] = String(1_750_000_100_000_000 + i);
        headers["x-amz-meta-size"] = String(Math.floor(rand() * 2 ** 30));
        headers["x-amz-meta-index-size"] = String(Math.floor(rand() * 2 ** 20));
        headers["x-amz-meta-format"] = "iggy-0.9";
        headers["x-amz-meta-xxh3-128"] = hex(32);
        headers["x-amz-meta-tierd-version"] = "0.1.0";
        break;
      case 2: // HEAD (verify)
        method = "HEAD";
        break;
      case 3: // UploadPart
        method = "PUT";
        query = [["partNumber", String(1 + Math.floor(rand() * 10000))], ["uploadId", hex(48)]];
        break;
      case 4: // CreateMultipartUpload
        method = "POST";
        query = [["uploads", ""]];
        headers["x-amz-meta-xxh3-128"] = hex(32);
        headers["x-amz-meta-format"] = "iggy-0.8";
        break;
      case 5: // ListObjectsV2, a page in
        path = "/tierd-bench";
        query = [
          ["list-type", "2"],
          ["prefix", [...key].slice(0, 1 + Math.floor(rand() * [...key].length)).join("")],
          ["max-keys", "1000"],
          ["continuation-token", hex(20) + "+/=" + hex(8)],
        ];
        break;
      case 6: // DeleteObjects with Content-MD5 and a body hash
        method = "POST";
        path = "/tierd-bench";
        query = [["delete", ""]];
        headers["content-md5"] = btoa(hex(16));
        headers["content-type"] = "application/xml";
        payloadHash = hex(64);
        break;
      default: // plain DELETE / GET of an empty-bodied object
        method = rand() < 0.5 ? "DELETE" : "GET";
        payloadHash = EMPTY_SHA256;
    }
    cases.push({ method, path, query, headers, payloadHash, url: "", encodedPath: "" });
  }
  return cases;
}

/** tierd's signer, with a signing-key cache as `S3Store` keeps one. */
function tierdSigner(): (c: SignCase) => Promise<string> {
  const cache = new Map<string, SigningKeyEntry>();
  return async (c) => {
    const signed = await signRequest({
      method: c.method,
      protocol: "http:",
      host: HOST,
      path: c.path,
      query: c.query,
      headers: c.headers,
      credentials: CREDENTIALS,
      region: REGION,
      service: "s3",
      now: NOW,
      payloadHash: c.payloadHash,
      cache,
    });
    return signed.headers.authorization;
  };
}

const AMZ_DATE = NOW.toISOString().replace(/[:-]|\.\d{3}/g, "");

/** aws4fetch: one `AwsClient` (its own key cache), `service: "s3"` and the region set. */
function aws4fetchSigner(): (c: SignCase) => Promise<string> {
  const client = new AwsClient({ ...CREDENTIALS, service: "s3", region: REGION });
  return async (c) => {
    const signed = await client.sign(c.url, {
      method: c.method,
      headers: { ...c.headers, "x-amz-content-sha256": c.payloadHash },
      aws: { datetime: AMZ_DATE, allHeaders: true },
    });
    return signed.headers.get("authorization") ?? "";
  };
}

/**
 * The hash the AWS SDK for JavaScript uses on Node (`@smithy/hash-node`): node:crypto's
 * `createHash`, or `createHmac` when given a key.
 */
class NodeSha256 {
  #hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  readonly #secret?: Uint8Array;

  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret = secret === undefined ? undefined : toBytes(secret);
    this.#hash = this.#fresh();
  }

  #fresh() {
    return this.#secret ? createHmac("sha256", this.#secret) : createHash("sha256");
  }

  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#hash.update(toBytes(data));
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.#hash.digest()));
  }

  reset(): void {
    this.#hash = this.#fresh();
  }
}

const utf8 = new TextEncoder();

function toBytes(data: string | ArrayBuffer | ArrayBufferView): Uint8Array {
  if (typeof data === "string") return utf8.encode(data);
  if (ArrayBuffer.isView(data)) {
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }
  return new Uint8Array(data);
}

/** @smithy/signature-v4 as the S3 client configures it: path encoded once by the caller. */
function smithySigner(): (c: SignCase) => Promise<string> {
  const signer = new SignatureV4({
    service: "s3",
    region: REGION,
    credentials: CREDENTIALS,
    sha256: NodeSha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  const [hostname, port] = HOST.split(":");
  return async (c) => {
    const query: Record<string, string> = {};
    for (const [k, v] of c.query) query[k] = v;
    const signed = await signer.sign({
      method: c.method,
      protocol: "http:",
      hostname,
      port: Number(port),
      path: c.encodedPath,
      query,
      headers: { ...c.headers, host: HOST, "x-amz-content-sha256": c.payloadHash },
    }, { signingDate: NOW });
    return String(signed.headers.authorization ?? "");
  };
}

/**
 * Passes over the request set per timed round: rounds of a few hundred milliseconds, long
 * against the kernel's CPU-time accounting granularity.
 */
const PASSES_PER_ROUND = 3;

/** Signatures per wall second and per CPU second of this process (all its threads). */
interface RoundRate {
  wall: number;
  cpu: number;
}

async function timeRound(
  sign: (c: SignCase) => Promise<string>,
  cases: readonly SignCase[],
): Promise<RoundRate> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let pass = 0; pass < PASSES_PER_ROUND; pass++) {
    for (const c of cases) await sign(c);
  }
  const wall = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const n = cases.length * PASSES_PER_ROUND;
  return { wall: n / wall, cpu: n / ((cpu.user + cpu.system) / 1e6) };
}

/** Fills in the URL and encoded path of each case from tierd's own signed request. */
async function prepare(cases: SignCase[]): Promise<void> {
  for (const c of cases) {
    const signed = await signRequest({
      method: c.method,
      protocol: "http:",
      host: HOST,
      path: c.path,
      query: c.query,
      headers: c.headers,
      credentials: CREDENTIALS,
      region: REGION,
      now: NOW,
      payloadHash: c.payloadHash,
    });
    c.url = signed.url;
    c.encodedPath = signed.canonicalRequest.split("\n")[1];
  }
}

/**
 * Runs the signing benchmark and records `sign_ratio_vs_aws4fetch`.
 * @returns the ratio
 */
export async function runSignBench(options: SignBenchOptions = {}): Promise<number> {
  const count = options.requests ?? 2000;
  const rounds = options.rounds ?? 9;
  const warmup = options.warmupRounds ?? 3;
  const cases = buildSignCases(count);
  await prepare(cases);

  const signers = {
    tierd: tierdSigner(),
    aws4fetch: aws4fetchSigner(),
    smithy: smithySigner(),
  };
  type Name = keyof typeof signers;
  const names = Object.keys(signers) as Name[];

  // The three must sign the same requests the same way, or the race means nothing.
  const agree: Record<string, number> = { aws4fetch: 0, smithy: 0 };
  for (const c of cases) {
    const ours = await signers.tierd(c);
    if (await signers.aws4fetch(c) === ours) agree.aws4fetch++;
    if (await signers.smithy(c) === ours) agree.smithy++;
  }
  progress(
    "sign",
    `${count} requests; identical Authorization headers: ` +
      `aws4fetch ${agree.aws4fetch}/${count}, smithy ${agree.smithy}/${count}`,
  );
  if (agree.aws4fetch !== count) {
    throw new Error(`aws4fetch signed ${count - agree.aws4fetch} requests differently from tierd`);
  }

  for (let r = 0; r < warmup; r++) {
    for (const name of names) await timeRound(signers[name], cases);
  }
  const rates: Record<Name, RoundRate[]> = { tierd: [], aws4fetch: [], smithy: [] };
  for (let r = 0; r < rounds; r++) {
    // Rotate the order so no signer always runs right after the same one (GC, JIT tiering).
    for (let j = 0; j < names.length; j++) {
      const name = names[(r + j) % names.length];
      rates[name].push(await timeRound(signers[name], cases));
    }
    progress(
      "sign",
      `round ${r + 1}/${rounds} (per CPU s / per wall s): ` +
        names.map((n) => `${n} ${Math.round(rates[n][r].cpu)} / ${Math.round(rates[n][r].wall)}`)
          .join(", "),
    );
  }

  // Many requests in flight at once (how a busy agent signs): one Promise.all per 100.
  const concurrent: Record<Name, number> = { tierd: 0, aws4fetch: 0, smithy: 0 };
  for (const name of names) {
    const per: number[] = [];
    for (let r = 0; r < Math.max(3, Math.floor(rounds / 2)); r++) {
      const started = performance.now();
      for (let i = 0; i < cases.length; i += 100) {
        await Promise.all(cases.slice(i, i + 100).map((c) => signers[name](c)));
      }
      per.push(cases.length / ((performance.now() - started) / 1000));
    }
    concurrent[name] = median(per);
  }

  const perCpu = (n: Name) => median(rates[n].map((x) => x.cpu));
  const perWall = (n: Name) => median(rates[n].map((x) => x.wall));
  const med = Object.fromEntries(names.map((n) => [n, perCpu(n)])) as Record<Name, number>;
  const wall = Object.fromEntries(names.map((n) => [n, perWall(n)])) as Record<Name, number>;
  const ratio = med.tierd / med.aws4fetch;
  progress(
    "sign",
    `median signatures per CPU second: tierd ${Math.round(med.tierd)}, aws4fetch ` +
      `${Math.round(med.aws4fetch)}, smithy ${Math.round(med.smithy)}; tierd ÷ aws4fetch = ` +
      `${ratio.toFixed(2)} (per wall second: ${(wall.tierd / wall.aws4fetch).toFixed(2)})`,
  );
  recordResult("sign_ratio_vs_aws4fetch", round(ratio, 3), "≥ 1.0 (stretch 2.0)", {
    method:
      `${count} varied S3 requests (ranged GET, conditional PUT with 9 x-amz-meta headers, HEAD, ` +
      `UploadPart, CreateMultipartUpload, ListObjectsV2, DeleteObjects with Content-MD5, ` +
      `DELETE; keys with unicode, spaces, + = & ' ( ) ! * ~ %, query values with + / =), ` +
      `one fixed date and region ${REGION}, signed one after another (each awaited) in one ` +
      `Deno process; ${warmup} warm-up rounds per signer, then ${rounds} timed rounds (each ` +
      `${PASSES_PER_ROUND} passes over the set) with the ` +
      `order rotated. Each round is timed both by the wall clock and by the process's CPU ` +
      `time (getrusage, all threads); the value is median(tierd) ÷ median(aws4fetch) ` +
      `signatures per CPU second, which other work on a shared machine does not skew (the ` +
      `wall-clock figures are in the details). ` +
      `Before timing, every request's Authorization header is checked equal across signers.`,
    settings: {
      signer: "providers/s3/sigv4.ts signRequest, signing-key cache (a Map) as S3Store keeps",
    },
    peers: {
      aws4fetch: "1.0.20, one AwsClient({ service: 's3', region }) (its own key cache), " +
        "sign(url, { aws: { datetime, allHeaders: true } })",
      "@smithy/signature-v4": "5.7.5, SignatureV4({ service: 's3', region, uriEscapePath: " +
        "false, applyChecksum: false, sha256: node:crypto createHash/createHmac as " +
        "@smithy/hash-node does })",
    },
    signatures_per_cpu_second: Object.fromEntries(names.map((n) => [n, Math.round(med[n])])),
    signatures_per_wall_second: Object.fromEntries(names.map((n) => [n, Math.round(wall[n])])),
    ratio_vs_aws4fetch_wall_clock: round(wall.tierd / wall.aws4fetch, 3),
    rounds_per_cpu_second: Object.fromEntries(
      names.map((n) => [n, rates[n].map((x) => Math.round(x.cpu))]),
    ),
    rounds_per_wall_second: Object.fromEntries(
      names.map((n) => [n, rates[n].map((x) => Math.round(x.wall))]),
    ),
    concurrent_100_signatures_per_wall_second: Object.fromEntries(
      names.map((n) => [n, Math.round(concurrent[n])]),
    ),
    ratio_vs_smithy: round(med.tierd / med.smithy, 3),
    identical_authorization: { aws4fetch: agree.aws4fetch, smithy: agree.smithy, of: count },
    notes: `per CPU second: tierd ${Math.round(med.tierd)}, aws4fetch ` +
      `${Math.round(med.aws4fetch)}, smithy ${Math.round(med.smithy)} (sequential, median of ` +
      `${rounds} rounds); wall-clock ratio ${(wall.tierd / wall.aws4fetch).toFixed(2)}`,
  });
  return ratio;
}
