// Hostile requests: every bad parameter gets its documented status and a JSON error, path
// tricks never reach a file, and a fuzz loop over random paths and queries never gets a 500.
import assert from "node:assert/strict";
import fc from "fast-check";
import { buildScenario, removeSegment } from "../read/_scenario.ts";
import { appFor, errorBody, RECORDS } from "./_app.ts";

const s = await buildScenario({
  format: "iggy-0.8",
  before: 40,
  after: 10,
  segmentSize: 1024,
  payloadSize: 32,
  evict: 1,
});
const { app } = appFor(s, { apiToken: "t0ken" });
const end = s.records.at(-1)!.lastOffset;

const CASES: [string, number, string][] = [
  // offsets
  [`${RECORDS}?offset=-1`, 400, "bad_parameter"],
  [`${RECORDS}?offset=NaN`, 400, "bad_parameter"],
  [`${RECORDS}?offset=abc`, 400, "bad_parameter"],
  [`${RECORDS}?offset=1.5`, 400, "bad_parameter"],
  [`${RECORDS}?offset=1e3`, 400, "bad_parameter"],
  [`${RECORDS}?offset=%2B5`, 400, "bad_parameter"],
  [`${RECORDS}?offset=%205`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0x10`, 400, "bad_parameter"],
  [`${RECORDS}?offset=`, 400, "bad_parameter"],
  [`${RECORDS}?offset=18446744073709551616`, 400, "bad_parameter"],
  [`${RECORDS}?offset=${"9".repeat(400)}`, 400, "bad_parameter"],
  [`${RECORDS}?offset=18446744073709551615`, 404, "offset_past_end"],
  [`${RECORDS}?offset=${end + 1n}`, 404, "offset_past_end"],
  [`${RECORDS}`, 400, "bad_parameter"],
  [`${RECORDS}?max_bytes=10`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&timestamp=0`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&offset=1`, 400, "bad_parameter"],
  [`${RECORDS}?timestamp=-5`, 400, "bad_parameter"],
  [`${RECORDS}?timestamp=99999999999999999999`, 400, "bad_parameter"],
  [`${RECORDS}?timestamp=18446744073709551615`, 404, "offset_past_end"],
  // max_bytes: 1..64 MiB
  [`${RECORDS}?offset=0&max_bytes=0`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&max_bytes=10737418240`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&max_bytes=67108865`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&max_bytes=-1`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&max_bytes=1.5`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&format=xml`, 400, "bad_parameter"],
  [`${RECORDS}?offset=0&maxbytes=10`, 400, "bad_parameter"],
  // ids
  ["/v1/streams/9/topics/0/partitions/0/records?offset=0", 404, "unknown_partition"],
  ["/v1/streams/0/topics/0/partitions/7/records?offset=0", 404, "unknown_partition"],
  ["/v1/streams/abc/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/-1/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/4294967296/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/0x0/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  // path traversal
  ["/v1/streams/..%2F..%2F..%2Fetc/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/0/topics/0/partitions/..%2F..%2Fpasswd/records?offset=0", 400, "bad_parameter"],
  // URL parsing turns %2e%2e into "..", so this one never reaches the route.
  ["/v1/streams/0/topics/0/partitions/%2e%2e/records?offset=0", 404, "not_found"],
  ["/v1/streams/0%00/topics/0/partitions/0/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/0/topics/0/partitions/0%2F..%2F1/records?offset=0", 400, "bad_parameter"],
  ["/v1/streams/../../../../etc/passwd", 404, "not_found"],
  ["/v1/streams/0/topics/0/partitions/0/records/../../../../../etc/passwd", 404, "not_found"],
  // routes
  ["/nope", 404, "not_found"],
  ["/v1/partitions/0", 404, "not_found"],
];

Deno.test("hostile parameters get their documented status and a JSON error", async () => {
  for (const [path, status, code] of CASES) {
    const res = await app.request(path);
    assert.equal(res.status, status, path);
    assert.equal((await errorBody(res)).error, code, path);
  }
});

Deno.test("an offset below retention answers 416", async () => {
  const t = await buildScenario({
    format: "iggy-0.9",
    before: 0,
    after: 40,
    segmentSize: 1024,
    payloadSize: 32,
    evict: 0,
  });
  try {
    await removeSegment(t, 0n);
    const res = await appFor(t).app.request(`${RECORDS}?offset=0`);
    assert.equal(res.status, 416);
    const body = await errorBody(res);
    assert.equal(body.error, "offset_below_retention");
    assert.match(body.message, /first available offset is \d+/);
  } finally {
    await t.cleanup();
  }
});

Deno.test("methods other than GET on reads, and POST without a token, are refused", async () => {
  const post = await app.request(`${RECORDS}?offset=0`, { method: "POST" });
  assert.equal(post.status, 404);
  await errorBody(post);
  const admin = await app.request("/v1/admin/pass", { method: "POST" });
  assert.equal(admin.status, 401);
  await errorBody(admin);
});

/** Pieces a hostile client might put in a path segment or a query value. */
const piece = fc.oneof(
  fc.constantFrom(
    "0",
    "1",
    "-1",
    "..",
    "%2e%2e",
    "%2F",
    "%00",
    "%",
    "%zz",
    "%E0%A4%A",
    "18446744073709551616",
    "99999999999999999999999",
    "NaN",
    "1e9",
    "0x1",
    " ",
    "%20",
    "\u00e9",
    "\u{1F600}",
    "'",
    '"',
    "<script>",
    "&",
    "=",
    "?",
    "#",
    ";",
  ),
  fc.string({ maxLength: 12 }),
  fc.bigInt({ min: 0n, max: 1n << 70n }).map(String),
);
const segment = fc.array(piece, { maxLength: 3 }).map((p) => p.join(""));
const query = fc.array(
  fc.tuple(
    fc.constantFrom("offset", "timestamp", "max_bytes", "format", "junk", "", "offset[]"),
    segment,
  ),
  { maxLength: 4 },
).map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join("&"));
const id = fc.oneof({ arbitrary: fc.constant("0"), weight: 3 }, { arbitrary: segment, weight: 1 });
const path = fc.oneof(
  {
    arbitrary: fc.tuple(id, id, id, query).map(([a, b, c, q]) =>
      `/v1/streams/${a}/topics/${b}/partitions/${c}/records?${q}`
    ),
    weight: 4,
  },
  { arbitrary: query.map((q) => `${RECORDS}?${q}`), weight: 4 },
  {
    arbitrary: fc.array(segment, { maxLength: 6 }).map((parts) => `/${parts.join("/")}`),
    weight: 1,
  },
  {
    arbitrary: fc.tuple(fc.constantFrom("/v1/admin/", "/v1/", "/metrics", "/"), segment)
      .map(([a, b]) => a + b),
    weight: 1,
  },
);

Deno.test("fuzz: random paths and queries never get a 500, and the app keeps serving", async () => {
  let served = 0;
  await fc.assert(
    fc.asyncProperty(path, fc.constantFrom("GET", "POST", "HEAD"), async (p, method) => {
      let request: Request;
      try {
        request = new Request(`http://localhost${p.startsWith("/") ? p : "/" + p}`, { method });
      } catch {
        return; // not a URL a client could send
      }
      const res = await app.request(request);
      served++;
      if (res.status >= 500) {
        assert.fail(`${method} ${p} answered ${res.status}: ${await res.text()}`);
      }
      if (res.status >= 400 && method !== "HEAD") await errorBody(res);
      else await res.body?.cancel();
    }),
    { numRuns: 400 },
  );
  assert.ok(served >= 300, `only ${served} requests were valid URLs`);
  const health = await app.request("/healthz");
  assert.equal(health.status, 200);
  await health.body?.cancel();
  const read = await app.request(`${RECORDS}?offset=0&max_bytes=1`);
  assert.equal(read.status, 200);
  assert.deepEqual(new Uint8Array(await read.arrayBuffer()), s.records[0].bytes);
});

Deno.test({
  name: "cleanup",
  fn: () => s.cleanup(),
});
