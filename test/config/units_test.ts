import assert from "node:assert/strict";
import fc from "fast-check";
import {
  formatDuration,
  formatSize,
  parseDuration,
  parseSize,
  UnitError,
} from "../../src/config/units.ts";
import { parseListen } from "../../src/config/listen.ts";

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;
const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

Deno.test("parseDuration reads the config file's duration forms", () => {
  const cases: [string, number][] = [
    ["250 ms", 250],
    ["90 s", 90 * S],
    ["5 m", 5 * M],
    ["1h", H],
    ["1 d", D],
    ["2 w", 14 * D],
    ["2 h 30 m", 2 * H + 30 * M],
    ["2h30m", 2 * H + 30 * M],
    ["1 minute 5 seconds", M + 5 * S],
    ["  10 SEC ", 10 * S],
    ["0", 0],
    ["0 s", 0],
    ["unlimited", Infinity],
    ["none", Infinity],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, text);
});

Deno.test("parseDuration refuses bare numbers, unknown units and junk, naming the text", () => {
  for (const text of ["90", "", "5 parsecs", "1.5 h", "-1 s", "s", "5 m and", "10 s 3"]) {
    assert.throws(() => parseDuration(text), (e: unknown) => {
      assert.ok(e instanceof UnitError, text);
      assert.equal(e.text, text);
      assert.ok(e.message.includes(JSON.stringify(text)));
      return true;
    });
  }
  assert.throws(() => parseDuration("90"), /unit/);
  assert.throws(() => parseDuration("99999999999999 d"), UnitError);
});

Deno.test("parseSize reads binary and decimal units and bare byte counts", () => {
  const cases: [string, number][] = [
    ["64 MiB", 64 * MiB],
    ["4 GiB", 4 * GiB],
    ["512 KiB", 512 * KiB],
    ["1 MB", 1_000_000],
    ["1 kb", 1000],
    ["100 B", 100],
    ["100", 100],
    ["0", 0],
    ["1.5 GiB", 1.5 * GiB],
    ["2TiB", 2 * 1024 * GiB],
    ["unlimited", Infinity],
  ];
  for (const [text, bytes] of cases) assert.equal(parseSize(text), bytes, text);
});

Deno.test("parseSize refuses junk, fractional bytes and sizes past 2^53", () => {
  for (const text of ["", "MiB", "5 MiBs", "1.3 B", "-1 MiB", "1e6", "10 PiB", "none"]) {
    assert.throws(() => parseSize(text), UnitError, text);
  }
});

Deno.test("formatDuration and formatSize write what an operator would", () => {
  assert.equal(formatDuration(90 * S), "90 s");
  assert.equal(formatDuration(5 * M), "5 m");
  assert.equal(formatDuration(D), "1 d");
  assert.equal(formatDuration(250), "250 ms");
  assert.equal(formatDuration(0), "0 s");
  assert.equal(formatDuration(Infinity), "unlimited");
  assert.equal(formatSize(64 * MiB), "64 MiB");
  assert.equal(formatSize(1_000_000), "1 MB");
  assert.equal(formatSize(100), "100 B");
  assert.equal(formatSize(0), "0 B");
  assert.equal(formatSize(Infinity), "unlimited");
});

const durations = fc.oneof(
  fc.constant(Infinity),
  fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  fc.nat({ max: 10_000 }).map((n) => n * S),
  fc.nat({ max: 10_000 }).map((n) => n * H),
);
const sizes = fc.oneof(
  fc.constant(Infinity),
  fc.nat({ max: Number.MAX_SAFE_INTEGER }),
  fc.nat({ max: 1 << 20 }).map((n) => n * MiB),
  fc.nat({ max: 1 << 20 }).map((n) => n * 1_000_000),
);

Deno.test("property: parseDuration ∘ formatDuration is the identity", () => {
  fc.assert(fc.property(durations, (ms) => parseDuration(formatDuration(ms)) === ms));
});

Deno.test("property: parseSize ∘ formatSize is the identity", () => {
  fc.assert(fc.property(sizes, (bytes) => parseSize(formatSize(bytes)) === bytes));
});

Deno.test("property: a compound duration is the sum of its terms", () => {
  const unit = fc.constantFrom<[string, number]>(["ms", 1], ["s", S], ["m", M], ["h", H], ["d", D]);
  fc.assert(fc.property(
    fc.array(fc.tuple(fc.nat({ max: 100_000 }), unit), { minLength: 1, maxLength: 5 }),
    fc.constantFrom(" ", ""),
    (terms, sep) => {
      const text = terms.map(([n, [u]]) => `${n}${sep}${u}`).join(" ");
      return parseDuration(text) === terms.reduce((sum, [n, [, per]]) => sum + n * per, 0);
    },
  ));
});

Deno.test("property: any text either parses or throws UnitError", () => {
  fc.assert(fc.property(fc.string({ maxLength: 20 }), (text) => {
    for (const parse of [parseDuration, parseSize]) {
      try {
        const n = parse(text);
        assert.ok(n === Infinity || (Number.isSafeInteger(n) && n >= 0));
      } catch (e) {
        assert.ok(e instanceof UnitError);
      }
    }
  }));
});

Deno.test("parseListen splits host:port, IPv6 in brackets", () => {
  assert.deepEqual(parseListen("127.0.0.1:7070"), { host: "127.0.0.1", port: 7070 });
  assert.deepEqual(parseListen("[::1]:7070"), { host: "::1", port: 7070 });
  assert.deepEqual(parseListen("localhost:0"), { host: "localhost", port: 0 });
  for (const text of ["localhost", ":7070", "host:70000", "a b:1", "::1:7070", "host:-1"]) {
    assert.throws(() => parseListen(text), UnitError, text);
  }
});
