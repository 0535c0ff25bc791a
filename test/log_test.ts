// The logger keeps tierd's own text readable and scrubs only foreign text: with Iggy's default
// password `iggy`, object keys, the prefix and paths stay as they are; a long secret inside an
// Error (what a store or the broker answered) is replaced in every form it can take.
import assert from "node:assert/strict";
import { createLogger } from "../src/log.ts";
import { foreignTextScrubber, MIN_SCRUB_LENGTH, scrubDeep } from "../src/scrub.ts";
import { FakeClock } from "./_fake_clock.ts";

function logger(secrets: string[]) {
  const lines: string[] = [];
  const log = createLogger({ secrets, write: (l) => void lines.push(l), clock: new FakeClock() });
  return { log, lines };
}

Deno.test("log: a short secret such as Iggy's default password leaves keys, prefix and paths alone", () => {
  const { log, lines } = logger(["iggy"]);
  const key = "iggy/local/0/0/0/0123456789abcdef-0/00000000000000000000.log";
  log.info("segment copied", { key, prefix: "iggy", path: "/var/lib/iggy/local_data" });
  log.warn("store failed", { err: new Error(`PUT ${key}: AccessDenied for user iggy`) });
  assert.equal(JSON.parse(lines[0]).key, key);
  assert.equal(JSON.parse(lines[0]).prefix, "iggy");
  assert.equal(JSON.parse(lines[0]).path, "/var/lib/iggy/local_data");
  assert.equal(JSON.parse(lines[1]).err.message, `PUT ${key}: AccessDenied for user iggy`);
  assert.ok(!lines.join("\n").includes("***"));
});

Deno.test("log: a long secret is scrubbed from an Error's message and detail, raw, JSON-escaped and URL-encoded", () => {
  const secret = 'wJalr"XUtn/FEMI+K7MDENG';
  const { log, lines } = logger([secret, "iggy"]);
  const err = Object.assign(
    new Error(
      `the store said: <Message>bad key ${secret}</Message> sig=${encodeURIComponent(secret)}`,
    ),
    { detail: { code: `X-${secret}`, nested: [{ body: JSON.stringify({ k: secret }) }] } },
  );
  log.error("request failed", { err, key: "iggy/local/0/0/0/x.log" });
  const line = lines[0];
  for (const form of [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)]) {
    assert.ok(!line.includes(form), `${form} in ${line}`);
  }
  const parsed = JSON.parse(line);
  assert.equal(parsed.err.message, "the store said: <Message>bad key ***</Message> sig=***");
  assert.equal(parsed.err.detail.code, "X-***");
  assert.equal(parsed.key, "iggy/local/0/0/0/x.log", "tierd's own fields are written as they are");
});

Deno.test("scrub: only secrets of at least MIN_SCRUB_LENGTH characters are scrubbed, the longest first", () => {
  assert.equal(MIN_SCRUB_LENGTH, 8);
  const scrub = foreignTextScrubber(["1234567", "12345678", "12345678-abcdef", ""]);
  assert.equal(scrub("a 1234567 b"), "a 1234567 b");
  assert.equal(scrub("a 12345678 b"), "a *** b");
  assert.equal(scrub("token 12345678-abcdef end"), "token *** end");
  assert.equal(foreignTextScrubber(["iggy"])("iggy/local"), "iggy/local");
  assert.deepEqual(
    scrubDeep({ a: ["x 12345678", 3, null], b: { c: "12345678" } }, scrub),
    { a: ["x ***", 3, null], b: { c: "***" } },
  );
});

Deno.test("log: an error's message goes out without the runtime's advice to its developers", () => {
  const { log, lines } = logger([]);
  log.error("store failed", {
    err: new TypeError(
      "ECONNRESET: The socket connection was closed unexpectedly. For more information, pass " +
        "`verbose: true` in the second argument to fetch()",
    ),
  });
  assert.equal(
    JSON.parse(lines[0]).err.message,
    "ECONNRESET: The socket connection was closed unexpectedly.",
  );
});
